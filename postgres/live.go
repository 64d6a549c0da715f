package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// connectReplication opens a logical replication connection (replication=database).
func connectReplication(ctx context.Context, dsn string) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: DSN: %w", err)
	}
	cfg.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: replication connection: %w", err)
	}
	return conn, nil
}

// liveTable is a table's state in the live phase: its columns as the last Relation message gave them and the
// builder of the changes not yet handed to Apply.
type liveTable struct {
	t       *tableInfo
	cols    []column
	keyIdx  []int // each key column's index in cols
	b       *rowBuilder
	op      *array.StringBuilder
	before  []array.Builder // the before-image key columns
	touched bool            // changes since the last checkpoint
	// deferred: the table's primary key is DEFERRABLE, so a transaction may hold two rows of one key for a
	// while (UPDATE t SET id = id + 1): its changes are held until the commit and applied by their net effect
	// per key (see netChanges). Other tables' keys are unique at every change, and their changes stream.
	deferred bool
	held     []heldChange
	// heldEmptied: a truncate in the transaction emptied the table before the held changes.
	heldEmptied bool
}

// heldChange is a change of a deferred table, held until its transaction commits: the new row's values
// (unchanged TOAST values taken from the old row; nil for a delete) and the old row's (nil when the stream
// sent none), copied out of the stream's buffer, nil for a null.
type heldChange struct {
	op       string // "insert", "update", "delete"
	vals     [][]byte
	old      [][]byte
	oldWhole bool // old carries every column (REPLICA IDENTITY FULL), not only the key
}

// live streams the slot's changes from its confirmed LSN (see Run).
type liveState struct {
	p         *pipeline
	rels      map[uint32]*liveTable
	txLSN     uint64 // the current transaction's commit LSN
	inTx      bool
	lastFinal uint64 // commit LSN of the last transaction read
	lastEnd   uint64 // its end LSN: what the slot may confirm once it is committed
	pending   int    // changes read since the last checkpoint
	changes   int64
	published atomic.Uint64 // end LSN of the last checkpointed transaction
	confirmed atomic.Uint64 // end LSN committed in every table: what the slot confirms
	applied   atomic.Int64  // changes checkpointed
}

func (p *pipeline) live(ctx context.Context, repl *pgconn.PgConn, start uint64) error {
	s := &liveState{p: p, rels: map[uint32]*liveTable{}}
	s.confirmed.Store(start)
	s.published.Store(start)
	args := []string{"proto_version '1'", "publication_names " + quoteLiteral(p.cfg.Publication), "binary 'true'"}
	if err := pglogrepl.StartReplication(ctx, repl, p.cfg.Slot, pglogrepl.LSN(start),
		pglogrepl.StartReplicationOptions{Mode: pglogrepl.LogicalReplication, PluginArgs: args}); err != nil {
		return fmt.Errorf("postgres: starting replication on slot %s: %w", p.cfg.Slot, err)
	}
	p.cfg.Logger.Info("postgres: live phase", "slot", p.cfg.Slot, "from", pglogrepl.LSN(start).String())
	p.event(Event{Kind: "live-start", LSN: start})

	// The committer: every FlushInterval, commit what the reader has checkpointed, then let the reader confirm it.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	flushed := make(chan struct{})
	go func() {
		defer close(flushed)
		tick := time.NewTicker(p.cfg.FlushInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			target := s.published.Load()
			if target <= s.confirmed.Load() {
				continue
			}
			applied := s.applied.Load()
			t0 := time.Now()
			err := p.router.Flush(ctx)
			if d := time.Since(t0); d > slowStep {
				p.cfg.Logger.Info("postgres: slow commit of the live phase", "took", d)
			}
			if err != nil {
				cancel(fmt.Errorf("postgres: committing changes: %w", err))
				return
			}
			storeMax(&s.confirmed, target)
			p.event(Event{Kind: "confirmed", LSN: target, Rows: applied})
		}
	}()
	err := s.loop(ctx, repl)
	cancel(err)
	<-flushed
	return err
}

func storeMax(a *atomic.Uint64, v uint64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

const (
	slowStep        = time.Second // a commit or an Apply that takes longer is logged
	statusEvery     = 5 * time.Second
	checkpointEvery = 100 * time.Millisecond
)

// loop reads the stream until ctx ends. On the way out it checkpoints what it applied (at a transaction
// boundary), which Run's Close commits.
func (s *liveState) loop(ctx context.Context, repl *pgconn.PgConn) error {
	p := s.p
	nextStatus := time.Now()
	lastCheckpoint := time.Now()
	var sent uint64
	for {
		if ctx.Err() != nil {
			if context.Cause(ctx) != ctx.Err() && !errors.Is(context.Cause(ctx), context.Canceled) {
				return context.Cause(ctx)
			}
			if !s.inTx {
				if err := s.checkpoint(context.WithoutCancel(ctx)); err != nil {
					return err
				}
			}
			return ctx.Err()
		}
		now := time.Now()
		if c := s.confirmed.Load(); now.After(nextStatus) || c > sent {
			if err := pglogrepl.SendStandbyStatusUpdate(ctx, repl, pglogrepl.StandbyStatusUpdate{
				WALWritePosition: pglogrepl.LSN(c), WALFlushPosition: pglogrepl.LSN(c), WALApplyPosition: pglogrepl.LSN(c),
			}); err != nil {
				return fmt.Errorf("postgres: standby status: %w", err)
			}
			sent, nextStatus = c, now.Add(statusEvery)
		}
		if s.pending > 0 && !s.inTx && now.Sub(lastCheckpoint) >= checkpointEvery {
			if err := s.checkpoint(ctx); err != nil {
				return err
			}
			lastCheckpoint = now
		}
		deadline := nextStatus
		if s.pending > 0 && !s.inTx {
			deadline = lastCheckpoint.Add(checkpointEvery)
		}
		if d := time.Now().Add(p.cfg.FlushInterval); d.Before(deadline) {
			deadline = d // to send a confirmation soon after the committer's
		}
		// A deadline already past would make ReceiveMessage return at once without reading.
		if soon := time.Now().Add(time.Millisecond); deadline.Before(soon) {
			deadline = soon
		}
		rctx, rcancel := context.WithDeadline(ctx, deadline)
		msg, err := repl.ReceiveMessage(rctx)
		rcancel()
		if err != nil {
			if pgconn.Timeout(err) || ctx.Err() != nil {
				continue
			}
			return fmt.Errorf("postgres: replication stream: %w", err)
		}
		switch msg := msg.(type) {
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("postgres: replication stream: %w", pgconn.ErrorResponseToPgError(msg))
		case *pgproto3.CopyData:
			if len(msg.Data) == 0 {
				continue
			}
			switch msg.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(msg.Data[1:])
				if err != nil {
					return err
				}
				// Nothing read is left to commit: the server's WAL up to here holds nothing for these tables.
				if !s.inTx && s.pending == 0 && s.published.Load() == s.confirmed.Load() {
					storeMax(&s.confirmed, uint64(ka.ServerWALEnd))
					storeMax(&s.published, uint64(ka.ServerWALEnd))
				}
				if ka.ReplyRequested {
					nextStatus = time.Time{}
				}
			case pglogrepl.XLogDataByteID:
				xld, err := pglogrepl.ParseXLogData(msg.Data[1:])
				if err != nil {
					return err
				}
				if err := s.handle(ctx, xld.WALData); err != nil {
					return err
				}
				if s.pending >= p.cfg.BatchRows && !s.inTx {
					if err := s.checkpoint(ctx); err != nil {
						return err
					}
					lastCheckpoint = time.Now()
				}
			}
		}
	}
}

// handle applies one pgoutput message.
func (s *liveState) handle(ctx context.Context, data []byte) error {
	msg, err := pglogrepl.Parse(data)
	if err != nil {
		return fmt.Errorf("postgres: pgoutput: %w", err)
	}
	switch m := msg.(type) {
	case *pglogrepl.RelationMessage:
		return s.relation(ctx, m)
	case *pglogrepl.BeginMessage:
		s.inTx, s.txLSN = true, uint64(m.FinalLSN)
	case *pglogrepl.CommitMessage:
		for _, lt := range s.rels {
			if err := s.release(ctx, lt); err != nil {
				return err
			}
		}
		s.inTx, s.lastFinal, s.lastEnd = false, uint64(m.CommitLSN), uint64(m.TransactionEndLSN)
	case *pglogrepl.InsertMessage:
		if lt := s.table(m.RelationID); lt != nil {
			return s.change(ctx, lt, "insert", m.Tuple, nil, false)
		}
	case *pglogrepl.UpdateMessage:
		if lt := s.table(m.RelationID); lt != nil {
			return s.change(ctx, lt, "update", m.NewTuple, m.OldTuple, m.OldTupleType == pglogrepl.UpdateMessageTupleTypeOld)
		}
	case *pglogrepl.DeleteMessage:
		if lt := s.table(m.RelationID); lt != nil {
			return s.change(ctx, lt, "delete", m.OldTuple, nil, m.OldTupleType == pglogrepl.DeleteMessageTupleTypeOld)
		}
	case *pglogrepl.TruncateMessage:
		for _, rel := range m.RelationIDs {
			if lt := s.table(rel); lt != nil {
				if err := s.truncate(ctx, lt); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// table returns the live state of a relation the pipeline copies, nil for any other, or when the table already
// holds the current transaction (committed before a restart).
func (s *liveState) table(rel uint32) *liveTable {
	lt := s.rels[rel]
	if lt == nil {
		return nil
	}
	if pos, ok := s.p.slotPos[lt.t.String()]; ok && s.txLSN <= pos {
		return nil
	}
	return lt
}

// relation takes a Relation message: the table's columns as the stream sends them from here on. A change of
// columns (one added, dropped, or of another type) applies the changes read so far, then builds the new
// shape; Apply's schema evolution adds new columns to the Iceberg table.
func (s *liveState) relation(ctx context.Context, m *pglogrepl.RelationMessage) error {
	t := s.p.byOID[m.RelationID]
	if t == nil {
		return nil
	}
	lt := s.rels[m.RelationID]
	cols := make([]column, len(m.Columns))
	for i, c := range m.Columns {
		cols[i] = column{name: c.Name, oid: c.DataType, typmod: c.TypeModifier}
		if lt != nil {
			if j := indexOf(lt.cols, c.Name); j >= 0 && lt.cols[j].oid == c.DataType && lt.cols[j].typmod == c.TypeModifier {
				cols[i].typ = lt.cols[j].typ
				continue
			}
		}
		typ, err := s.p.mapper.mapColumn(ctx, t.ident, c.Name, c.DataType, c.TypeModifier)
		if err != nil {
			return fmt.Errorf("postgres: table %s column %q: %w", t, c.Name, err)
		}
		cols[i].typ = typ
	}
	if lt != nil && sameColumns(lt.cols, cols) {
		return nil
	}
	// Columns added since the last shape (or since Run described the table) may have a value on the older rows
	// that the stream does not carry: added with it as their default, or refused (addColumns). Changes of the
	// old shape that come after (held ones below, or replayed) take it as the column's write-default.
	prev := t.cols
	if lt != nil {
		prev = lt.cols
	}
	var added []column
	for _, c := range cols {
		if indexOf(prev, c.name) < 0 {
			added = append(added, c)
		}
	}
	if len(added) > 0 {
		if err := addColumns(ctx, s.p.conn, t, s.p.writer(t), added); err != nil {
			return err
		}
	}
	if lt != nil {
		// Held changes are in the old shape: they go now, by their net effect so far (exact unless the rest of
		// the transaction moves the same keys again).
		if err := s.release(ctx, lt); err != nil {
			return err
		}
		if err := s.applyPending(ctx, lt); err != nil {
			return err
		}
		lt.b.release()
		s.p.cfg.Logger.Info("postgres: table shape changed", "table", t.String(), "columns", len(cols))
	} else {
		lt = &liveTable{t: t, deferred: s.p.deferrable[t.oid]}
		s.rels[m.RelationID] = lt
	}
	lt.cols, lt.keyIdx = cols, nil
	fields := make([]arrow.Field, 0, len(cols)+1+len(t.key))
	for _, c := range cols {
		fields = append(fields, arrow.Field{Name: c.name, Type: c.typ.arrow, Nullable: true})
	}
	fields = append(fields, arrow.Field{Name: opColumn, Type: arrow.BinaryTypes.String})
	for _, k := range t.key {
		j := indexOf(cols, k)
		if j < 0 {
			return fmt.Errorf("postgres: table %s: key column %q is gone from the stream", t, k)
		}
		lt.keyIdx = append(lt.keyIdx, j)
		fields = append(fields, arrow.Field{Name: beforePrefix + k, Type: cols[j].typ.arrow, Nullable: true})
	}
	lt.b = newRowBuilder(t.String(), cols, t.key, arrow.NewSchema(fields, nil))
	lt.op = lt.b.fields[len(cols)].(*array.StringBuilder)
	lt.before = lt.b.fields[len(cols)+1:]
	return nil
}

func indexOf(cols []column, name string) int {
	for i, c := range cols {
		if c.name == name {
			return i
		}
	}
	return -1
}

func sameColumns(a, b []column) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].name != b[i].name || a[i].oid != b[i].oid || a[i].typmod != b[i].typmod {
			return false
		}
	}
	return true
}

// change adds one change to the table's builder. An update's columns that pgoutput marks unchanged (TOAST
// values it does not resend) are taken from the old row, which REPLICA IDENTITY FULL makes complete; the
// old row's key is the before-image key, which makes Apply delete the old key when the update changed it.
// Every BatchRows changes of a table go to Apply, even inside a transaction: the position that commits them
// comes at the transaction's end, so a large transaction is not held whole in the builders; a table with a
// deferrable key is the exception (see liveTable.deferred). oldWhole: old carries every column.
func (s *liveState) change(ctx context.Context, lt *liveTable, op string, tup, old *pglogrepl.TupleData, oldWhole bool) error {
	if len(lt.t.key) == 0 && op != "insert" {
		return fmt.Errorf("%w: %s: an %s in the stream (a table without one is append-only: add a primary key, or leave the table out)",
			ErrNoPrimaryKey, lt.t, op)
	}
	if tup == nil || len(tup.Columns) != len(lt.cols) {
		return fmt.Errorf("postgres: table %s: %s of %d columns, the relation has %d", lt.t, op, tupleLen(tup), len(lt.cols))
	}
	if old != nil && len(old.Columns) != len(lt.cols) {
		old = nil
	}
	vals := make([][]byte, len(tup.Columns))
	for i, c := range tup.Columns {
		if c.DataType == pglogrepl.TupleDataTypeToast {
			if old == nil || old.Columns[i].DataType != pglogrepl.TupleDataTypeBinary {
				return fmt.Errorf("postgres: table %s column %q: an update left this TOAST value unchanged and the "+
					"old row does not carry it: set REPLICA IDENTITY FULL on the table", lt.t, lt.cols[i].name)
			}
			c = old.Columns[i]
		}
		vals[i] = value(c)
	}
	var oldVals [][]byte
	if old != nil {
		oldVals = make([][]byte, len(old.Columns))
		for i, c := range old.Columns {
			oldVals[i] = value(c)
		}
	}
	s.pending++
	s.changes++
	lt.touched = true
	if lt.deferred && len(lt.t.key) > 0 {
		hc := heldChange{op: op, vals: copyValues(vals), old: copyValues(oldVals), oldWhole: oldWhole}
		if op == "delete" {
			hc.vals, hc.old, hc.oldWhole = nil, hc.vals, oldWhole
		}
		lt.held = append(lt.held, hc)
		return nil
	}
	if err := s.appendChange(lt, op, vals, oldVals); err != nil {
		return err
	}
	if lt.b.rows >= s.p.cfg.BatchRows {
		return s.applyPending(ctx, lt)
	}
	return nil
}

// appendChange adds a row to the table's builder: its values, op, and the before-image key from old (nil:
// none).
func (s *liveState) appendChange(lt *liveTable, op string, vals, old [][]byte) error {
	for i, v := range vals {
		if err := lt.b.appendValue(i, v); err != nil {
			return lt.b.withKey(err, func(j int) []byte { return vals[j] })
		}
	}
	lt.op.Append(op)
	for j, k := range lt.keyIdx {
		if old == nil || old[k] == nil {
			lt.before[j].AppendNull()
			continue
		}
		if err := lt.cols[k].typ.append(lt.before[j], old[k]); err != nil {
			return fmt.Errorf("postgres: table %s column %q (old key): %w", lt.t, lt.cols[k].name, err)
		}
	}
	lt.b.rows++
	return nil
}

// copyValues copies values out of the stream's buffer, which the next message reuses.
func copyValues(vals [][]byte) [][]byte {
	if vals == nil {
		return nil
	}
	out := make([][]byte, len(vals))
	for i, v := range vals {
		if v != nil {
			out[i] = append([]byte{}, v...)
		}
	}
	return out
}

func tupleLen(t *pglogrepl.TupleData) int {
	if t == nil {
		return 0
	}
	return len(t.Columns)
}

// value is a tuple column's binary value, nil for null.
func value(c *pglogrepl.TupleDataColumn) []byte {
	if c.DataType != pglogrepl.TupleDataTypeBinary {
		return nil
	}
	if c.Data == nil {
		return []byte{}
	}
	return c.Data
}

// applyPending hands the table's changes read so far to Apply.
func (s *liveState) applyPending(ctx context.Context, lt *liveTable) error {
	if lt.b.rows == 0 {
		return nil
	}
	rec := lt.b.record()
	defer rec.Release()
	t0 := time.Now()
	src := s.p.writer(lt.t).Source(s.p.slotPartition())
	if len(lt.t.key) == 0 {
		// A table without a primary key takes inserts only (change refuses the rest): its columns, without
		// the op column, are appended.
		n := len(lt.cols)
		cols := rec.Columns()[:n]
		ins := array.NewRecordBatch(arrow.NewSchema(rec.Schema().Fields()[:n], nil), cols, rec.NumRows())
		err := src.Write(ctx, ins)
		ins.Release()
		if err != nil {
			return fmt.Errorf("postgres: table %s: %w", lt.t, err)
		}
	} else if err := src.Apply(ctx, rec); err != nil {
		return fmt.Errorf("postgres: table %s: %w", lt.t, err)
	}
	if d := time.Since(t0); d > slowStep {
		// Apply waits while the writer's memory or uncommitted batches are at their limits: the stream then
		// stalls, and the slot's lag grows.
		s.p.cfg.Logger.Info("postgres: slow Apply", "table", lt.t.String(), "rows", rec.NumRows(), "took", d)
	}
	return nil
}

// checkpoint applies every table's pending changes and records the last transaction's commit LSN on each table
// that changed since the last checkpoint; the committer then commits them and the slot confirms the end LSN.
func (s *liveState) checkpoint(ctx context.Context) error {
	if s.pending == 0 && s.lastEnd <= s.published.Load() {
		return nil
	}
	pos := strconv.FormatUint(s.lastFinal, 10)
	for _, lt := range s.rels {
		if !lt.touched {
			continue
		}
		if err := s.applyPending(ctx, lt); err != nil {
			return err
		}
		if err := s.p.writer(lt.t).CheckpointPositions(ctx, map[string]string{s.p.slotPartition(): pos}); err != nil {
			return err
		}
		lt.touched = false
	}
	s.applied.Add(int64(s.pending))
	s.pending = 0
	storeMax(&s.published, s.lastEnd)
	return nil
}

// truncate deletes every row of the table at this point of the stream: the changes before it are committed
// (with a position just before this transaction, so a restart replays the transaction whole), then the keys
// the table holds are read back and deleted.
func (s *liveState) truncate(ctx context.Context, lt *liveTable) error {
	if len(lt.t.key) == 0 {
		return fmt.Errorf("%w: %s: a truncate in the stream (a table without one is append-only: add a primary key, or leave the table out)",
			ErrNoPrimaryKey, lt.t)
	}
	// Held changes before the truncate are moot: the table is empty after it.
	lt.held, lt.heldEmptied = nil, true
	if err := s.applyPending(ctx, lt); err != nil {
		return err
	}
	w := s.p.writer(lt.t)
	if err := w.CheckpointPositions(ctx, map[string]string{s.p.slotPartition(): strconv.FormatUint(s.txLSN-1, 10)}); err != nil {
		return err
	}
	if err := s.p.router.Flush(ctx); err != nil {
		return fmt.Errorf("postgres: table %s: committing before a truncate: %w", lt.t, err)
	}
	keys, err := readKeys(ctx, w.Table(), lt.t.key)
	if err != nil {
		return fmt.Errorf("postgres: table %s: reading keys for a truncate: %w", lt.t, err)
	}
	for _, rec := range keys {
		err = errors.Join(err, w.Source(s.p.slotPartition()).Delete(ctx, rec))
		rec.Release()
	}
	if err != nil {
		return fmt.Errorf("postgres: table %s: truncate: %w", lt.t, err)
	}
	lt.touched = true
	s.pending++
	s.p.cfg.Logger.Info("postgres: table truncated", "table", lt.t.String())
	return nil
}

// readKeys reads the key columns of every row of tbl.
func readKeys(ctx context.Context, tbl *table.Table, key []string) ([]arrow.RecordBatch, error) {
	_, it, err := tbl.Scan(table.WithSelectedFields(key...)).ToArrowRecords(ctx)
	if err != nil {
		return nil, err
	}
	var out []arrow.RecordBatch
	for rec, err := range it {
		if err != nil {
			for _, r := range out {
				r.Release()
			}
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}
