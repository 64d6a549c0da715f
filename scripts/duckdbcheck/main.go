// Command duckdbcheck writes two small format-version 3 tables with this library, one with its variant column
// shredded (table property write.parquet.shred-variants) and one without, each with a variant, a timestamp_ns
// and a timestamptz_ns column, into an embedded catalog under -dir. It writes the rows' expected values as JSON
// lines (expected.jsonl) and the tables' live data files (files.txt), for scripts/duckdb-read.sh to compare
// with what DuckDB reads from the Parquet files.
//
//	go run ./scripts/duckdbcheck -dir /tmp/duck
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/apache/arrow-go/v18/parquet/variant"
	"github.com/apache/iceberg-go/table"
	iceberg "github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/catalog"
)

var schema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "v", Type: extensions.NewDefaultVariantType(), Nullable: true},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}, Nullable: true},
	{Name: "tstz", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}, Nullable: true},
}, nil)

// row is one row's expected values: V is the variant as JSON (absent: SQL null), Ts and Tstz nanoseconds since
// the epoch as decimal strings (absent: null).
type row struct {
	Table string  `json:"table"`
	ID    int64   `json:"id"`
	V     *string `json:"v,omitempty"`
	Ts    *string `json:"ts,omitempty"`
	Tstz  *string `json:"tstz,omitempty"`
}

// doc is row id's variant as JSON ("" for SQL null): every kind DuckDB's JSON form keeps, objects and arrays
// nested. For the shredded table (wrap) each value but the nulls goes into an object as $.k beside $.a and $.s,
// which iceberg-go shreds (a column whose values are of several kinds at the top stays unshredded).
func doc(id int64, wrap bool) string {
	d := kind(id)
	if !wrap || d == "" || d == "null" {
		return d
	}
	return fmt.Sprintf(`{"a": %d, "s": "row %d", "k": %s}`, id, id, d)
}

// kind is row id's value of doc.
func kind(id int64) string {
	switch id % 10 {
	case 0:
		return ""
	case 1:
		return "null"
	case 2:
		return strconv.FormatInt(id*1_000_003, 10)
	case 3:
		return fmt.Sprintf(`"text %d é"`, id)
	case 4:
		return fmt.Sprintf(`[%d, "two", true, null, {"deep": [1.5, {"x": %d}]}]`, id, -id)
	case 5:
		return fmt.Sprintf(`{"a": %d, "s": "row %d", "f": %g, "b": false, "n": null}`, id, id, float64(id)/4)
	}
	return fmt.Sprintf(`{"a": %d, "s": "row %d", "o": {"list": [%d, %d], "t": "in"}}`, id, id, id, id+1)
}

// nanos is row id's timestamp in nanoseconds since the epoch: around the epoch (±1 ns), before 1970, and now.
func nanos(id int64) (int64, bool) {
	switch id % 7 {
	case 0:
		return 0, false
	case 1:
		return 1, true
	case 2:
		return -1, true
	case 3:
		return time.Date(1969, 7, 20, 20, 17, 40, 123456789, time.UTC).UnixNano() - id, true
	}
	return time.Date(2026, 12, 3, 14, 0, 0, 999, time.UTC).UnixNano() + id*1_000_000_007, true
}

func main() {
	dir := flag.String("dir", "", "folder for the catalog, the warehouse and the expected values")
	rows := flag.Int64("rows", 1000, "rows per table")
	flag.Parse()
	if *dir == "" {
		log.Fatal("-dir is required")
	}
	if err := run(context.Background(), *dir, *rows); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, dir string, rows int64) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	wh := filepath.Join(abs, "warehouse")
	if err := os.MkdirAll(wh, 0o755); err != nil {
		return err
	}
	cat, err := catalog.Open(ctx, "sqlite://"+filepath.Join(abs, "catalog.db")+"?warehouse=file://"+wh)
	if err != nil {
		return err
	}
	exp, err := os.Create(filepath.Join(abs, "expected.jsonl"))
	if err != nil {
		return err
	}
	defer exp.Close()
	files, err := os.Create(filepath.Join(abs, "files.txt"))
	if err != nil {
		return err
	}
	defer files.Close()
	enc := json.NewEncoder(exp)
	for _, shred := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "shredded"}[shred]
		ident := table.Identifier{"duck", name}
		w, err := iceberg.NewWriter(ctx, cat, ident, iceberg.WithCreate(schema, iceberg.FormatVersion(3),
			iceberg.TableProperties(map[string]string{table.ParquetShredVariantsKey: strconv.FormatBool(shred)})),
			iceberg.WithFlushInterval(0))
		if err != nil {
			return err
		}
		rec, err := batch(rows, shred)
		if err != nil {
			return err
		}
		err = w.Write(ctx, rec)
		rec.Release()
		if err == nil {
			err = w.Close(ctx)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		for id := range rows {
			r := row{Table: name, ID: id}
			if d := doc(id, shred); d != "" {
				r.V = &d
			}
			if ns, ok := nanos(id); ok {
				s := strconv.FormatInt(ns, 10)
				r.Ts, r.Tstz = &s, &s
			}
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		tbl, err := cat.LoadTable(ctx, ident)
		if err != nil {
			return err
		}
		tasks, err := tbl.Scan().PlanFiles(ctx)
		if err != nil {
			return err
		}
		for _, t := range tasks {
			fmt.Fprintf(files, "%s\t%s\n", name, t.File.FilePath())
			if err := describe(name, t.File.FilePath()); err != nil {
				return err
			}
		}
	}
	return nil
}

// describe prints how a data file stores v: its Parquet logical type and whether it is shredded (a typed_value
// beside metadata and value).
func describe(name, location string) error {
	r, err := file.OpenParquetFile(strings.TrimPrefix(location, "file://"), false)
	if err != nil {
		return err
	}
	defer r.Close()
	root := r.MetaData().Schema.Root()
	n := root.Field(root.FieldIndexByName("v")).(*pqschema.GroupNode)
	fmt.Printf("%s: %s: v is a %s group of %d fields (shredded: %v)\n", name, filepath.Base(location),
		n.LogicalType(), n.NumFields(), n.FieldIndexByName("typed_value") >= 0)
	return nil
}

// batch makes rows 0..rows-1 (wrap: the shredded table's variants).
func batch(rows int64, wrap bool) (arrow.RecordBatch, error) {
	b := array.NewRecordBuilder(memory.NewGoAllocator(), schema)
	defer b.Release()
	for id := range rows {
		b.Field(0).(*array.Int64Builder).Append(id)
		if d := doc(id, wrap); d == "" {
			b.Field(1).AppendNull()
		} else {
			v, err := variant.ParseJSON(d, false)
			if err != nil {
				return nil, fmt.Errorf("row %d: %w", id, err)
			}
			b.Field(1).(*extensions.VariantBuilder).Append(v)
		}
		for _, f := range []int{2, 3} {
			if ns, ok := nanos(id); ok {
				b.Field(f).(*array.TimestampBuilder).Append(arrow.Timestamp(ns))
			} else {
				b.Field(f).AppendNull()
			}
		}
	}
	return b.NewRecordBatch(), nil
}
