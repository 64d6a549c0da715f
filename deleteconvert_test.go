package iceberg_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	ice "github.com/apache/iceberg-go"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/tabletest"
)

// liveDeleteFiles counts the live delete files of the table's current snapshot from its delete manifests
// (equality deletes that apply to no data file included): equality deletes, position delete files and
// deletion vectors.
func liveDeleteFiles(t *testing.T, cat icecatalog.Catalog, ident table.Identifier) (eq, pos, dvs int) {
	return liveDeleteFilesAt(t, cat, ident, 0)
}

// liveDeleteFilesAt is liveDeleteFiles at a snapshot (0: the current one).
func liveDeleteFilesAt(t *testing.T, cat icecatalog.Catalog, ident table.Identifier, snapshotID int64) (eq, pos, dvs int) {
	t.Helper()
	ctx := context.Background()
	tbl := tabletest.Load(t, cat, ident)
	snap := tbl.CurrentSnapshot()
	if snapshotID != 0 {
		snap = tbl.Metadata().SnapshotByID(snapshotID)
	}
	if snap == nil {
		return 0, 0, 0
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mans, err := snap.Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mans {
		if m.ManifestContent() != ice.ManifestContentDeletes {
			continue
		}
		entries, err := m.FetchEntries(fs, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			switch df := e.DataFile(); {
			case df.ContentType() == ice.EntryContentEqDeletes:
				eq++
			case df.FileFormat() == ice.PuffinFile:
				dvs++
			default:
				pos++
			}
		}
	}
	return eq, pos, dvs
}

// TestConvertEqualityDeletes: a table gets equality deletes from a second writer (its key index off) and from
// the first writer's fallback (the second writer's commits made its key index stale); ConvertEqualityDeletes
// leaves no equality delete file live, writes position deletes (v2) or deletion vectors (v3) instead, and the
// table reads back as the model before and after, and after more upserts and deletes of the first writer. Both
// format versions, partitioned and not; 2 rounds of both writers before the conversion (ICEWRITER_SOAK=1: 4).
func TestConvertEqualityDeletes(t *testing.T) {
	t.Parallel() // see TestMain
	for _, c := range []struct {
		version     int
		partitioned bool
	}{{2, false}, {3, false}, {2, true}, {3, true}} {
		t.Run(fmt.Sprintf("v%d/partitioned=%v", c.version, c.partitioned), func(t *testing.T) {
			ctx := context.Background()
			cat := openCatalog(t)
			ident := table.Identifier{"mor", "convert"}
			create := []iceberg.CreateOption{iceberg.IdentifierFields("id"), iceberg.FormatVersion(c.version)}
			if c.partitioned {
				create = append(create, iceberg.PartitionBy("bucket(4, id)"))
			}
			open := func(id string, opts ...iceberg.Option) *iceberg.Writer {
				w, err := iceberg.NewWriter(ctx, cat, ident, append([]iceberg.Option{
					iceberg.WithCreate(kvSchema, create...), iceberg.WithMode(iceberg.MergeOnRead), iceberg.WithWriterID(id),
					iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0), iceberg.WithDeleteConversionEvery(0),
					iceberg.WithRowGroupRowsForTest(64)}, opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				return w
			}
			rng := rand.New(rand.NewPCG(uint64(c.version), 18))
			model := kvModel{}
			a := open("a")
			ids := make([]int64, 1000)
			for i := range ids {
				ids[i] = int64(i)
				model.insert(ids[i], ids[i])
			}
			if err := a.Write(ctx, kvBatch(ids, ids)); err != nil {
				t.Fatal(err)
			}
			if err := a.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			b := open("b", iceberg.WithKeyIndexBytes(0))
			ops := &kvOps{rng: rng, keySpace: 1200, maxRows: 30, writes: 2, next: 1_000_000}
			for range iceberg.SoakForTest(t, 2, 4) { // rounds
				for _, w := range []*iceberg.Writer{a, b} {
					for range 5 {
						ops.apply(t, ctx, w, model)
					}
					if err := w.Flush(ctx); err != nil {
						t.Fatal(err)
					}
				}
			}
			compareKV(t, readKV(t, cat, ident), model)
			eq, _, _ := liveDeleteFiles(t, cat, ident)
			if eq == 0 {
				t.Fatal("no equality delete files before the conversion: the test converts nothing")
			}

			res, err := a.ConvertEqualityDeletes(ctx)
			if err != nil {
				t.Fatal(err)
			}
			compareKV(t, readKV(t, cat, ident), model)
			eqAfter, pos, dvs := liveDeleteFiles(t, cat, ident)
			if eqAfter != 0 || res.EqualityDeleteFiles != eq || res.DeletedRows == 0 {
				t.Fatalf("after the conversion: %d equality delete files live (%d before), result %+v", eqAfter, eq, res)
			}
			if c.version == 2 && pos == 0 || c.version == 3 && (dvs == 0 || pos != 0) {
				t.Fatalf("v%d after the conversion: %d position delete files, %d deletion vectors", c.version, pos, dvs)
			}
			if again, err := a.ConvertEqualityDeletes(ctx); err != nil || again.SnapshotID != 0 {
				t.Fatalf("a second conversion: %+v, %v; want nothing to do", again, err)
			}
			// The first writer goes on: its deletes merge with the converted ones.
			for range 10 {
				ops.apply(t, ctx, a, model)
			}
			for _, w := range []*iceberg.Writer{a, b} {
				if err := w.Close(ctx); err != nil {
					t.Fatal(err)
				}
			}
			compareKV(t, readKV(t, cat, ident), model)
		})
	}
}

// conversions hears the writer's equality delete conversions.
type conversions chan iceberg.DeleteConversion

func (c conversions) OnDeleteConversion(ev iceberg.DeleteConversion) { c <- ev }

// TestMaintainerConvertsEqualityDeletes: in a mixed run, a second writer without a key index upserts into the
// table the first writer upserts into (both write equality deletes: the second always, the first on v2 and once
// the second's commits made its key index stale on v3). The first writer's maintainer, converting every 4
// commits, makes a pass within its next 4 commits, and the pass's snapshot holds zero live equality delete files
// (on v2 the writer's next commits add new ones: its upserts write equality deletes until the key index covers
// v2 tables). The table reads back as the model.
func TestMaintainerConvertsEqualityDeletes(t *testing.T) {
	t.Parallel() // see TestMain
	for _, version := range []int{2, 3} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) {
			ctx := context.Background()
			cat := openCatalog(t)
			ident := table.Identifier{"mor", "maintained"}
			open := func(id string, opts ...iceberg.Option) *iceberg.Writer {
				w, err := iceberg.NewWriter(ctx, cat, ident, append([]iceberg.Option{
					iceberg.WithCreate(kvSchema, iceberg.IdentifierFields("id"), iceberg.FormatVersion(version)),
					iceberg.WithWriterID(id), iceberg.WithFlushInterval(0), iceberg.WithSmallFileCompactionEvery(0)}, opts...)...)
				if err != nil {
					t.Fatal(err)
				}
				return w
			}
			rng := rand.New(rand.NewPCG(uint64(version), 4))
			model := kvModel{}
			ops := &kvOps{rng: rng, keySpace: 500, maxRows: 20, writes: 3, next: 1_000_000}
			events := make(conversions, 16)
			a := open("a", iceberg.WithDeleteConversionEvery(4), iceberg.WithHooks(events))
			b := open("b", iceberg.WithKeyIndexBytes(0), iceberg.WithDeleteConversionEvery(0))
			flushed := func(w *iceberg.Writer) {
				t.Helper()
				ops.apply(t, ctx, w, model)
				ops.apply(t, ctx, w, model)
				if err := w.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for range 6 { // 6 commits each: a's pass after its 4th commit ran before b's last ones
				flushed(a)
				flushed(b)
			}
			if eq, _, _ := liveDeleteFiles(t, cat, ident); eq == 0 {
				t.Fatal("no equality delete files after the mixed run: the test converts nothing")
			}
			before := currentSequence(t, cat, ident)
			for range 4 {
				flushed(a)
				// The pass runs off the commit path: waiting for it makes it build on this commit (on v2 a's
				// next commits add equality deletes again).
				<-iceberg.BackgroundPassDoneForTest(a)
			}
			if err := a.Close(ctx); err != nil { // delivers every event
				t.Fatal(err)
			}
			close(events)
			var pass iceberg.DeleteConversion
			for ev := range events {
				pass = ev // the last pass
			}
			tbl := tabletest.Load(t, cat, ident)
			if s := tbl.Metadata().SnapshotByID(pass.Result.SnapshotID); s == nil || s.SequenceNumber <= before {
				t.Fatalf("no conversion in the 4 commits after the mixed run (last: %+v)", pass)
			}
			if pass.Err != nil || !pass.Automatic || pass.Result.EqualityDeleteFiles == 0 {
				t.Fatalf("the pass: %+v", pass)
			}
			if eq, _, _ := liveDeleteFilesAt(t, cat, ident, pass.Result.SnapshotID); eq != 0 {
				t.Fatalf("%d equality delete files live in the pass's snapshot", eq)
			}
			if err := b.Close(ctx); err != nil {
				t.Fatal(err)
			}
			compareKV(t, readKV(t, cat, ident), model)
		})
	}
}

// currentSequence returns the sequence number of the table's current snapshot.
func currentSequence(t *testing.T, cat icecatalog.Catalog, ident table.Identifier) int64 {
	t.Helper()
	tbl := tabletest.Load(t, cat, ident)
	return tbl.CurrentSnapshot().SequenceNumber
}
