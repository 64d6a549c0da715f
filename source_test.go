package iceberg_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
)

// partitionRows makes rows n..n+k-1 of partition p as kv rows: id p*1,000,000+offset, v the offset.
func partitionRows(p, n, k int) ([]int64, []int64) {
	ids, vs := make([]int64, k), make([]int64, k)
	for i := range k {
		ids[i], vs[i] = int64(p*1_000_000+n+i), int64(n+i)
	}
	return ids, vs
}

// TestSourcesAsAConsumerGroupMember is a consumer-group member as a connector writes it: four partitions
// written through their Source handles with a position checkpoint after each poll, files sized by the flush
// policy, one partition revoked mid-stream (its rows up to its last position committed, the ones after it
// dropped, the rest of the writer going on), and Close. The table then holds exactly each partition's rows up to its last position.
func TestSourcesAsAConsumerGroupMember(t *testing.T) {
	t.Parallel() // see TestMain
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"sources", "member"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema), iceberg.WithWriterID("member-0"),
		iceberg.WithCheckpoints(), iceberg.WithFlushRows(1500), iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	const parts, polls, perPoll = 4, 20, 100
	want := kvModel{}
	next := make([]int, parts) // the next offset of each partition
	poll := func(p, k int, checkpoint bool) {
		ids, vs := partitionRows(p, next[p], k)
		rec := kvBatch(ids, vs)
		defer rec.Release()
		src := w.Source("orders/" + strconv.Itoa(p))
		if err := src.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
		next[p] += k
		if checkpoint {
			if err := src.Checkpoint(ctx, strconv.Itoa(next[p])); err != nil {
				t.Fatal(err)
			}
			for i := range ids {
				want.insert(ids[i], vs[i])
			}
		}
	}
	for i := range polls {
		for p := range parts {
			poll(p, perPoll, true)
		}
		if i == polls/2 {
			// Partition 3 is revoked after rows its position does not cover yet: they are dropped.
			poll(3, 30, false)
			if err := w.Source("orders/3").Abort(ctx); err != nil {
				t.Fatal(err)
			}
			next[3] -= 30
		}
	}
	poll(1, 20, false) // after partition 1's last position: discarded by Close
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	compareKV(t, readKV(t, cat, ident), want)
	st := w.Stats()
	if st.DiscardedRows != 50 {
		t.Errorf("discarded %d rows, want 30 aborted and 20 after the last position", st.DiscardedRows)
	}
	if rows := parts * polls * perPoll; st.FilesWritten > int64(rows/1500+2) {
		t.Errorf("%d files for %d rows at 1,500 rows a batch: checkpoints must not end files", st.FilesWritten, rows)
	}
	// Every partition's position is its last checkpoint; a new owner (another writer ID) of partition 3 resumes
	// from it and the table holds each row once.
	got, err := iceberg.Positions(ctx, cat, ident)
	if err != nil {
		t.Fatal(err)
	}
	next[1] -= 20
	for p := range parts {
		if want := strconv.Itoa(next[p]); got["orders/"+strconv.Itoa(p)] != want {
			t.Errorf("partition %d at %q, want %s", p, got["orders/"+strconv.Itoa(p)], want)
		}
	}
	owner, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithWriterID("member-1"), iceberg.WithCheckpoints())
	if err != nil {
		t.Fatal(err)
	}
	src := owner.Source("orders/3")
	pos, ok, err := src.Position(ctx)
	if err != nil || !ok {
		t.Fatalf("Position: %q %v %v", pos, ok, err)
	}
	from, _ := strconv.Atoi(pos)
	ids, vs := partitionRows(3, from, 40)
	rec := kvBatch(ids, vs)
	defer rec.Release()
	if err := src.Write(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := src.Checkpoint(ctx, strconv.Itoa(from+40)); err != nil {
		t.Fatal(err)
	}
	if err := owner.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range ids {
		want.insert(ids[i], vs[i])
	}
	compareKV(t, readKV(t, cat, ident), want)
	if pos, _, _ := w.Source("orders/3").Position(ctx); pos != strconv.Itoa(from+40) {
		t.Errorf("after the new owner: %q", pos)
	}

}

// TestSourceAbortAfterASealBeforeItsCheckpoint revokes a partition whose rows the flush policy sealed before
// the poll's checkpoint was placed (a seal without a checkpoint; the checkpoint then sits in the open buffer):
// the checkpoint covers them, so Abort commits them with it instead of failing with ErrPartitionUncovered.
func TestSourceAbortAfterASealBeforeItsCheckpoint(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"sources", "sealed"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema), iceberg.WithWriterID("member-0"),
		iceberg.WithCheckpoints(), iceberg.WithFlushRows(100), iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	src := w.Source("orders/0")
	ids, vs := partitionRows(0, 0, 150)
	rec := kvBatch(ids, vs)
	defer rec.Release()
	if err := src.Write(ctx, rec); err != nil { // 150 rows: past the flush policy, sealed without a checkpoint
		t.Fatal(err)
	}
	if err := src.Checkpoint(ctx, "150"); err != nil {
		t.Fatal(err)
	}
	if err := src.Abort(ctx); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	want := kvModel{}
	for i := range ids {
		want.insert(ids[i], vs[i])
	}
	compareKV(t, readKV(t, cat, ident), want)
	if pos, ok, err := src.Position(ctx); err != nil || !ok || pos != "150" {
		t.Errorf("position %q (%v, %v), want 150", pos, ok, err)
	}
}

// TestSourceAbortDropsRowsTheFlushPolicyMet revokes a partition whose rows passed the flush policy before any
// checkpoint of theirs (the rebalance came between poll and checkpoint) while another partition checkpointed:
// the policy left them open, so Abort drops them instead of failing with ErrPartitionUncovered, and the table
// holds exactly the other partition's checkpointed rows.
func TestSourceAbortDropsRowsTheFlushPolicyMet(t *testing.T) {
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"sources", "revoked"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(kvSchema), iceberg.WithWriterID("member-0"),
		iceberg.WithCheckpoints(), iceberg.WithFlushRows(100), iceberg.WithFlushInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	write := func(src *iceberg.Source, p, k int) {
		ids, vs := partitionRows(p, 0, k)
		rec := kvBatch(ids, vs)
		defer rec.Release()
		if err := src.Write(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	revoked, kept := w.Source("orders/0"), w.Source("orders/1")
	write(revoked, 0, 150) // past the flush policy, no checkpoint
	write(kept, 1, 10)
	if err := kept.Checkpoint(ctx, "9"); err != nil {
		t.Fatal(err)
	}
	if err := revoked.Abort(ctx); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	want := kvModel{}
	ids, vs := partitionRows(1, 0, 10)
	for i := range ids {
		want.insert(ids[i], vs[i])
	}
	compareKV(t, readKV(t, cat, ident), want)
	if s := w.Stats(); s.DiscardedRows != 150 {
		t.Errorf("discarded %d rows, want the revoked partition's 150", s.DiscardedRows)
	}
	if _, ok, err := revoked.Position(ctx); err != nil || ok {
		t.Errorf("revoked partition has a position (%v, %v)", ok, err)
	}
}

// TestSourceAbortDropsRowsTheMemoryLimitSealed revokes a partition whose rows the memory limit sealed with no
// checkpoint of theirs (a large poll between checkpoints), while another partition's rows, checkpointed and
// not, were sealed with them: Abort drops the revoked partition's rows from the sealed batches instead of
// failing with ErrPartitionUncovered, the table holds exactly the other partition's checkpointed rows and the
// revoked one's up to its committed position, and the writer goes on (the partition written again included).
// Upserts and Apply changes behave the same when no key has rows of both partitions (a Kafka topic keyed by its
// partitioner): the revoked poll also changes every row the partition committed, which must keep its old
// values, and with a version column the replay after Resume, older than the dropped changes, is applied.
func TestSourceAbortDropsRowsTheMemoryLimitSealed(t *testing.T) {
	t.Parallel() // see TestMain
	for _, mode := range []string{"inserts", "upserts", "apply"} {
		t.Run(mode, func(t *testing.T) { testAbortAfterMemorySeal(t, mode) })
	}
}

func testAbortAfterMemorySeal(t *testing.T, mode string) {
	keyed := mode != "inserts"
	ctx := context.Background()
	cat := openCatalog(t)
	ident := table.Identifier{"sources", "memsealed"}
	opts := []iceberg.Option{iceberg.WithCreate(kvSchema), iceberg.WithWriterID("member-0"),
		iceberg.WithCheckpoints(), iceberg.WithMemoryLimit(1 << 20), iceberg.WithFlushRows(1 << 30),
		iceberg.WithFlushInterval(0)}
	if keyed {
		opts = append(opts, iceberg.WithKeys("id"))
	}
	if mode == "apply" {
		opts = append(opts, iceberg.WithChangeColumns(iceberg.ChangeColumns{Version: "seq"}))
	}
	w, err := iceberg.NewWriter(ctx, cat, ident, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	want := kvModel{}
	ver := int64(1) // Apply's version of the changes put makes
	put := func(src *iceberg.Source, ids, vs []int64, kept bool) {
		t.Helper()
		rec := kvBatch(ids, vs)
		write, model := src.Write, want.insert
		switch mode {
		case "upserts":
			write, model = src.Upsert, want.upsert
		case "apply":
			chs := make([]kvChange, len(ids))
			for i := range ids {
				chs[i] = kvChange{op: "u", id: ids[i], v: vs[i], before: -1, ver: ver}
			}
			rec.Release()
			rec = changeBatch(chs, changeColumns{version: "seq"})
			write, model = src.Apply, want.upsert
		}
		defer rec.Release()
		if err := write(ctx, rec); err != nil {
			t.Fatal(err)
		}
		for i := range ids {
			if kept {
				model(ids[i], vs[i])
			}
		}
	}
	write := func(src *iceberg.Source, p, n, k int, kept bool) {
		t.Helper()
		ids, vs := partitionRows(p, n, k)
		put(src, ids, vs, kept)
	}
	checkpoint := func(src *iceberg.Source, pos int) {
		t.Helper()
		if err := src.Checkpoint(ctx, strconv.Itoa(pos)); err != nil {
			t.Fatal(err)
		}
	}
	revoked, kept := w.Source("orders/0"), w.Source("orders/1")
	write(revoked, 0, 0, 100, true)
	checkpoint(revoked, 100)
	write(kept, 1, 0, 100, true)
	checkpoint(kept, 100)
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	write(kept, 1, 100, 50, true)
	checkpoint(kept, 150)
	// The revoked partition's poll: far past the memory limit (a quarter of it for rows), no checkpoint; the
	// other partition's rows in the middle of it are not checkpointed yet either.
	const calls, rows = 12, 2000
	discarded := int64(calls * rows)
	ver = 10
	if keyed {
		ids, vs := partitionRows(0, 0, 100)
		for i := range vs {
			vs[i] = -1
		}
		put(revoked, ids, vs, false)
		discarded += 100
	}
	for i := range calls {
		if keyed {
			write(revoked, 0, 100, rows, false) // a change stream's updates: the same keys again
		} else {
			write(revoked, 0, 100+i*rows, rows, false)
		}
		if i == calls/2 {
			write(kept, 1, 150, 30, true)
		}
	}
	if s := w.Stats(); s.UncommittedRows < rows {
		t.Fatalf("the memory limit sealed %d rows, want the revoked partition's sealed: %+v", s.UncommittedRows, s)
	}
	if err := revoked.Abort(ctx); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	if s := w.Stats(); s.DiscardedRows != discarded {
		t.Errorf("discarded %d rows, want the revoked partition's %d", s.DiscardedRows, discarded)
	}
	checkpoint(kept, 180)
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	compareKV(t, readKV(t, cat, ident), want)
	positions := func(wantRevoked, wantKept string) {
		t.Helper()
		for src, want := range map[*iceberg.Source]string{revoked: wantRevoked, kept: wantKept} {
			if pos, ok, err := src.Position(ctx); err != nil || !ok || pos != want {
				t.Errorf("%s: position %q (%v, %v), want %s", src.Partition(), pos, ok, err, want)
			}
		}
	}
	positions("100", "180")
	// The writer goes on: the revoked partition resumes from its committed position, the other one continues.
	if pos, _, err := revoked.Resume(ctx); err != nil || pos != "100" {
		t.Fatalf("Resume: %q, %v", pos, err)
	}
	ver = 5 // older than the dropped changes: applied only if Abort forgot their versions
	write(revoked, 0, 100, 20, true)
	if keyed {
		ids, vs := partitionRows(0, 0, 100)
		for i := range vs {
			vs[i] = 7
		}
		put(revoked, ids, vs, true)
	}
	checkpoint(revoked, 120)
	write(kept, 1, 180, 5, true)
	checkpoint(kept, 185)
	if err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	compareKV(t, readKV(t, cat, ident), want)
	positions("120", "185")
	if s := w.Stats(); s.UncommittedRows != 0 || s.BufferedRows != 0 || s.RowsCommitted != s.RowsAccepted-s.DiscardedRows {
		t.Errorf("after the last flush: %+v, want every row not discarded committed and none pending", s)
	}
	// The dropped batches' files (written before or after the abort) are deleted, not left as orphans.
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if files := unreferencedDataFiles(t, cat, ident); len(files) > 0 {
		t.Errorf("files no snapshot references: %v", files)
	}
}
