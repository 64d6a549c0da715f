// Command upsert replays a synthetic change stream (inserts, updates and deletes of customer rows, as a CDC
// connector would emit them) into an Iceberg table with Upsert and Delete, in either mode, then reads the table
// back and checks it against the stream.
//
//	go run ./examples/upsert                      # merge-on-read, format v3 (deletion vectors)
//	go run ./examples/upsert -mode cow -version 2 # copy-on-write
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	icecatalog "github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
)

var schema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "balance", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "updated_at", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
}, nil)

func main() {
	dir := flag.String("dir", "", "folder for the catalog and warehouse (default: a temporary folder)")
	mode := flag.String("mode", "mor", "mor (merge-on-read) or cow (copy-on-write)")
	version := flag.Int("version", 3, "table format version")
	events := flag.Int("events", 200_000, "change events to replay")
	flag.Parse()
	if err := run(context.Background(), *dir, *mode, *version, *events); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, dir, mode string, version, events int) error {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "icewriter-upsert")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	cat, err := catalog.Open(ctx, "sqlite://"+filepath.Join(dir, "catalog.db"))
	if err != nil {
		return err
	}
	defer cat.(icecatalog.Closer).Close()
	m := iceberg.MergeOnRead
	if mode == "cow" {
		m = iceberg.CopyOnWrite
	}
	ident := table.Identifier{"crm", "customers"}
	w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithMode(m),
		iceberg.WithCreate(schema, iceberg.IdentifierFields("id"), iceberg.FormatVersion(version)),
		iceberg.WithFlushRows(5_000), iceberg.WithAutoCompactEvery(50))
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	model := map[int64]int64{} // what the table must hold: id -> balance
	start := time.Now()
	const batch = 500
	for done := 0; done < events; done += batch {
		ub := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		kb := array.NewInt64Builder(memory.DefaultAllocator)
		var delIDs []int64
		for i := 0; i < batch; i++ {
			id := rng.Int64N(int64(events / 4))
			if _, exists := model[id]; exists && rng.IntN(10) == 0 {
				kb.Append(id) // a delete
				delIDs = append(delIDs, id)
				continue
			}
			bal := rng.Int64N(1_000_000)
			ub.Field(0).(*array.Int64Builder).Append(id)
			ub.Field(1).(*array.Int64Builder).Append(bal)
			ub.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(time.Now().UnixMicro()))
			model[id] = bal
		}
		// The batch's upserts go first, then its deletes: the expected state follows the same order.
		for _, id := range delIDs {
			delete(model, id)
		}
		ups := ub.NewRecordBatch()
		ids := kb.NewArray()
		dels := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil),
			[]arrow.Array{ids}, int64(ids.Len()))
		if err := w.Upsert(ctx, ups); err != nil {
			return err
		}
		if err := w.Delete(ctx, dels); err != nil {
			return err
		}
		ups.Release()
		dels.Release()
		ids.Release()
		ub.Release()
		kb.Release()
	}
	if err := w.Close(ctx); err != nil {
		return err
	}
	elapsed := time.Since(start)
	st := w.Stats()
	fmt.Printf("%s, v%d: %d events in %s (%.0f events/s), %d commits, %d data files, %d delete files, %d files rewritten\n",
		m, version, events, elapsed.Round(time.Millisecond), float64(events)/elapsed.Seconds(), st.Commits,
		st.FilesWritten, st.DeleteFiles, st.FilesRewritten)

	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		return err
	}
	_, recs, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		return err
	}
	got := map[int64]int64{}
	for rec, err := range recs {
		if err != nil {
			return err
		}
		ids, bals := rec.Column(0).(*array.Int64), rec.Column(1).(*array.Int64)
		for r := 0; r < int(rec.NumRows()); r++ {
			if _, dup := got[ids.Value(r)]; dup {
				return fmt.Errorf("id %d appears twice", ids.Value(r))
			}
			got[ids.Value(r)] = bals.Value(r)
		}
		rec.Release()
	}
	for id, bal := range model {
		if got[id] != bal {
			return fmt.Errorf("id %d: table has %d, the stream says %d", id, got[id], bal)
		}
	}
	if len(got) != len(model) {
		return fmt.Errorf("table has %d rows, the stream leaves %d", len(got), len(model))
	}
	fmt.Printf("read back %d rows: every key holds its last value\n", len(got))
	return nil
}
