package iceberg_test

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Change streams (Apply): random changes, the model's reading of them, and their batches.

// kvChange is one row of an Apply batch: its op value, key, value, before-image key and version.
type kvChange struct {
	op     string
	id, v  int64
	before int64 // the before-image key; -1: none
	noKey  bool  // the key columns are null (a Debezium delete: only the before image names the key)
	ver    int64
}

// Op spellings Apply accepts, by what they do.
var (
	upsertOps = []string{"insert", "INSERT", "Insert", "c", "C", "r", "R", "update", "UPDATE", "u", "U"}
	deleteOps = []string{"delete", "DELETE", "d", "D"}
)

// isDeleteOp reports whether an op value kvChange uses deletes.
func isDeleteOp(op string) bool { return slices.Contains(deleteOps, op) }

// randomChanges draws n changes over the key space, values fresh as kvOps gives them: inserts, updates (a
// third of them change the key, a third carry the same key as before image), deletes (a fifth of them with
// only the before image), re-inserts of deleted keys happening by chance. Versions are the values.
func (o *kvOps) randomChanges(n int) []kvChange {
	chs := make([]kvChange, n)
	for i := range chs {
		o.next++
		c := kvChange{id: o.rng.Int64N(o.keySpace), v: o.next, before: -1, ver: o.next}
		switch k := o.rng.IntN(10); {
		case k < 4:
			c.op = upsertOps[o.rng.IntN(7)]
		case k < 7:
			c.op = upsertOps[7+o.rng.IntN(4)]
			switch o.rng.IntN(3) {
			case 0:
				c.before = o.rng.Int64N(o.keySpace)
			case 1:
				c.before = c.id
			}
		default:
			c.op = deleteOps[o.rng.IntN(len(deleteOps))]
			if o.rng.IntN(5) == 0 {
				c.before, c.noKey = c.id, true
			}
		}
		chs[i] = c
	}
	return chs
}

// applyChanges applies changes to the model in order, as Apply does: an upsert op deletes its before-image key
// when that differs, then upserts its key; a delete removes its key (the before image's when it has none).
// With vers (key -> version of its last change, updated here), a change older than its key's is skipped. It
// returns what the changes applied did to each key (its last change) and how many were skipped.
func (m kvModel) applyChanges(chs []kvChange, vers map[int64]int64) (map[int64]kvKind, int) {
	changed := map[int64]kvKind{}
	skipped := 0
	apply := func(id int64, c kvChange, kind kvKind) {
		if vers != nil {
			if v, ok := vers[id]; ok && c.ver < v {
				skipped++
				return
			}
			vers[id] = c.ver
		}
		changed[id] = kind
		if kind == kvDelete {
			m.del(id)
		} else {
			m.upsert(id, c.v)
		}
	}
	for _, c := range chs {
		switch {
		case isDeleteOp(c.op) && c.noKey:
			apply(c.before, c, kvDelete)
		case isDeleteOp(c.op):
			apply(c.id, c, kvDelete)
		default:
			if c.before >= 0 && c.before != c.id {
				apply(c.before, c, kvDelete)
			}
			apply(c.id, c, kvUpsert)
		}
	}
	return changed, skipped
}

// changeColumns are the columns of a change batch beyond the table's (changeBatch).
type changeColumns struct {
	version  string // the version column ("": none)
	beforeTS bool   // ts is part of the key: a ts column and its before image (modelSchema)
	ts       bool   // the table has ts (modelSchema)
}

// changeBatch makes an Apply batch on kvSchema (with ts: modelSchema) tables: op, id, v, s[, ts], before_id[,
// before_ts][, version]. A delete row has null v and s (and a null ts unless ts is part of the key); a
// keyless delete has null key columns.
func changeBatch(chs []kvChange, cc changeColumns) arrow.RecordBatch {
	return changeBatchIn(memory.NewGoAllocator(), chs, cc)
}

// changeBatchIn is changeBatch with its buffers allocated from mem.
func changeBatchIn(mem memory.Allocator, chs []kvChange, cc changeColumns) arrow.RecordBatch {
	tsType := &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	fields := []arrow.Field{
		{Name: "op", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}
	if cc.ts {
		fields = append(fields, arrow.Field{Name: "ts", Type: tsType, Nullable: true})
	}
	fields = append(fields, arrow.Field{Name: "before_id", Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	if cc.beforeTS {
		fields = append(fields, arrow.Field{Name: "before_ts", Type: tsType, Nullable: true})
	}
	if cc.version != "" {
		fields = append(fields, arrow.Field{Name: cc.version, Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	}
	b := array.NewRecordBuilder(mem, arrow.NewSchema(fields, nil))
	defer b.Release()
	for _, c := range chs {
		f := 0
		next := func() array.Builder { f++; return b.Field(f - 1) }
		del := isDeleteOp(c.op)
		next().(*array.StringBuilder).Append(c.op)
		appendOr := func(bl array.Builder, null bool, add func()) {
			if null {
				bl.AppendNull()
			} else {
				add()
			}
		}
		idB := next().(*array.Int64Builder)
		appendOr(idB, c.noKey, func() { idB.Append(c.id) })
		vB := next().(*array.Int64Builder)
		appendOr(vB, del, func() { vB.Append(c.v) })
		sB := next().(*array.StringBuilder)
		appendOr(sB, del, func() { sB.Append(fmt.Sprintf("row-%d-%d", c.id, c.v)) })
		if cc.ts {
			tsB := next().(*array.TimestampBuilder)
			appendOr(tsB, c.noKey || (del && !cc.beforeTS), func() { tsB.Append(modelTS(c.id)) })
		}
		bB := next().(*array.Int64Builder)
		appendOr(bB, c.before < 0, func() { bB.Append(c.before) })
		if cc.beforeTS {
			btB := next().(*array.TimestampBuilder)
			appendOr(btB, c.before < 0, func() { btB.Append(modelTS(c.before)) })
		}
		if cc.version != "" {
			next().(*array.Int64Builder).Append(c.ver)
		}
	}
	return b.NewRecordBatch()
}
