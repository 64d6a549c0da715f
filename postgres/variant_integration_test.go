//go:build integration

package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/icewriter/iceberg"
	"github.com/icewriter/iceberg/internal/tabletest"
	"github.com/icewriter/iceberg/postgres"
)

// variantCell is a scanned variant cell as the models write it: "NULL" for SQL NULL, else "variant " and its
// value's canonical JSON (tabletest.CanonicalJSON: keys sorted, numbers exact), so the variant null is
// "variant null".
func variantCell(a arrow.Array, i int) string {
	v, err := tabletest.VariantValue(a, i)
	if err != nil {
		return "error: " + err.Error()
	}
	if v == tabletest.SQLNull {
		return "NULL"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "error: " + err.Error()
	}
	return "variant " + string(b)
}

// variantWant is what variantCell shows for a JSON document, "NULL" for none (SQL NULL).
func variantWant(t *testing.T, doc *string) string {
	t.Helper()
	if doc == nil {
		return "NULL"
	}
	v, err := tabletest.CanonicalJSON([]byte(*doc))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return "variant " + string(b)
}

// jsonDocs are documents of every kind: objects whose text has its keys out of order, a key twice (json keeps
// the text, jsonb the last value; the variant holds the last value, as Postgres's json functions read it) and
// spaces, nesting, arrays (empty too), strings with escapes and non-ASCII text, integers to the int64 bounds,
// decimals, numbers beyond int64, booleans, and the JSON null (not SQL NULL).
var jsonDocs = []string{
	`{"b": 1, "a": {"y": [1, 2], "x": null}, "a": {"z": "last"}}`,
	`{}`, `[]`, `[1, "two", 3.50, null, true, {"k": [[]]}]`,
	`"tab\tquote\" é 😀"`, `42`, `-9223372036854775808`, `9223372036854775807`, `123456789012345678901234567890`,
	`0.1`, `-12.50`, `1e-7`, `true`, `false`, `null`,
	`{"deep": {"a": {"b": {"c": {"d": {"e": [1, {"f": null}]}}}}}}`,
}

// bigDoc is a jsonb object of incompressible text, larger than a TOASTed value's threshold. It has 100 keys:
// arrow-go v18.8.0 cannot read a variant whose metadata offsets cross byte 255 (126 keys with two-byte offsets;
// apache/arrow-go#1291), although the value is valid.
func bigDoc() string {
	r := rand.New(rand.NewPCG(7, 7))
	var parts []string
	for i := range 100 {
		parts = append(parts, fmt.Sprintf(`"k%d": "%016x%016x%016x%016x"`, i, r.Uint64(), r.Uint64(), r.Uint64(), r.Uint64()))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

const docsDDL = `CREATE TABLE docs (id int PRIMARY KEY, j json, jb jsonb, note text)`

// docRow sets row id of docs to (j, jb, note) in Postgres (insert or update) and in the model.
func docRow(t *testing.T, dsn string, m model, insert bool, id int, j, jb *string, note string) {
	t.Helper()
	sqlOf := func(s *string) string {
		if s == nil {
			return "NULL"
		}
		return lit(*s)
	}
	if insert {
		execSQL(t, dsn, fmt.Sprintf("INSERT INTO docs VALUES (%d, %s, %s, %s)", id, sqlOf(j), sqlOf(jb), lit(note)))
	} else {
		execSQL(t, dsn, fmt.Sprintf("UPDATE docs SET j = %s, jb = %s, note = %s WHERE id = %d", sqlOf(j), sqlOf(jb), lit(note), id))
	}
	m[fmt.Sprint(id)] = map[string]string{"id": fmt.Sprint(id), "j": variantWant(t, j), "jb": variantWant(t, jb), "note": note}
}

// doc is jsonDocs[i] (cycling), nil (SQL NULL) every seventh.
func doc(i int) *string {
	if i%7 == 6 {
		return nil
	}
	d := jsonDocs[i%len(jsonDocs)]
	return &d
}

// TestJSONColumnsIntoVariantOnV3 copies and streams a table with json and jsonb columns into a format v3 table:
// both columns are variant, and every row reads back (iceberg-go's scanner) semantically equal to its JSON
// document, the JSON null as the variant null and SQL NULL as NULL: the snapshot, then inserts, updates between
// documents, JSON null and SQL NULL, an update of another column of a row whose jsonb is TOASTed (its value is
// not resent), and deletes.
func TestJSONColumnsIntoVariantOnV3(t *testing.T) {
	ctx := context.Background()
	dsn, slot := sourceDB(t)
	execSQL(t, dsn, docsDDL)
	want := model{}
	const n = 40
	for i := range n {
		docRow(t, dsn, want, true, i, doc(i), doc(i+5), fmt.Sprint("v0-", i))
	}
	big := bigDoc()
	docRow(t, dsn, want, true, 1000, nil, &big, "toast")
	cat := openCatalog(t, catalogURI(t))
	p := startPipeline(t, cat, postgres.Config{DSN: dsn, Slot: slot, FlushInterval: 50 * time.Millisecond,
		CreateOptions: []iceberg.CreateOption{iceberg.FormatVersion(3)}})
	p.wait(t, "live-start")
	ident := table.Identifier{"public", "docs"}
	read := func() (model, error) { return readTable(ctx, cat, ident, "id") }
	p.converge(t, read, want)
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"j", "jb"} {
		if f, ok := tbl.Schema().FindFieldByName(c); !ok || !f.Type.Equals(ice.VariantType{}) {
			t.Fatalf("column %s: %v, want variant", c, f.Type)
		}
	}

	for i := n; i < n+20; i++ {
		docRow(t, dsn, want, true, i, doc(i+2), doc(i), fmt.Sprint("v0-", i))
	}
	jsonNull := "null"
	for i := 0; i < n+20; i += 3 {
		switch i % 4 {
		case 0:
			docRow(t, dsn, want, false, i, &jsonNull, nil, fmt.Sprint("v1-", i))
		case 1:
			docRow(t, dsn, want, false, i, nil, &jsonNull, fmt.Sprint("v1-", i))
		default:
			docRow(t, dsn, want, false, i, doc(i+1), doc(i+9), fmt.Sprint("v1-", i))
		}
	}
	execSQL(t, dsn, "UPDATE docs SET note = 'toast-2' WHERE id = 1000")
	want["1000"]["note"] = "toast-2"
	for i := 1; i < n+20; i += 5 {
		execSQL(t, dsn, fmt.Sprintf("DELETE FROM docs WHERE id = %d", i))
		delete(want, fmt.Sprint(i))
	}
	p.converge(t, read, want)

	p.stopCleanly(t)
}

// TestJSONColumnsStayStringsOnV2: on a format v2 table (the default; v2 has no variant) json and jsonb columns
// are strings: json as its text, exactly, jsonb as Postgres prints it.
func TestJSONColumnsStayStringsOnV2(t *testing.T) {
	ctx := context.Background()
	dsn, slot := sourceDB(t)
	execSQL(t, dsn, docsDDL)
	want := model{}
	conn := mustConn(t, dsn)
	for i := range len(jsonDocs) {
		id := fmt.Sprint(i)
		execSQL(t, dsn, fmt.Sprintf("INSERT INTO docs VALUES (%d, %s, %s, 'x')", i, lit(jsonDocs[i]), lit(jsonDocs[i])))
		var jb string
		if err := conn.QueryRow(ctx, "SELECT jb::text FROM docs WHERE id = $1", i).Scan(&jb); err != nil {
			t.Fatal(err)
		}
		want[id] = map[string]string{"id": id, "j": jsonDocs[i], "jb": jb, "note": "x"}
	}
	cat := openCatalog(t, catalogURI(t))
	if err := postgres.Run(ctx, cat, postgres.Config{DSN: dsn, Slot: slot, Mode: postgres.ModeSnapshot}); err != nil {
		t.Fatal(err)
	}
	ident := table.Identifier{"public", "docs"}
	got, err := readTable(ctx, cat, ident, "id")
	if err != nil {
		t.Fatal(err)
	}
	if d := diff(want, got); d != "" {
		t.Fatal(d)
	}
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"j", "jb"} {
		if f, ok := tbl.Schema().FindFieldByName(c); !ok || !f.Type.Equals(ice.PrimitiveTypes.String) {
			t.Fatalf("column %s: %v, want string", c, f.Type)
		}
	}
}

// TestJSONColumnAddedWithDefaultOnV3: a jsonb column added with a default (which Postgres shows on the rows
// that existed) cannot take it as a variant's initial-default (the spec allows only null): Run stops with
// ErrAddedColumnDefault naming the table and column, rather than those rows reading NULL.
func TestJSONColumnAddedWithDefaultOnV3(t *testing.T) {
	ctx := context.Background()
	dsn, slot := sourceDB(t)
	execSQL(t, dsn, docsDDL, `INSERT INTO docs VALUES (1, '{"a": 1}', '[1]', 'x')`)
	cat := openCatalog(t, catalogURI(t))
	cfg := postgres.Config{DSN: dsn, Slot: slot, Mode: postgres.ModeSnapshot,
		CreateOptions: []iceberg.CreateOption{iceberg.FormatVersion(3)}}
	if err := postgres.Run(ctx, cat, cfg); err != nil {
		t.Fatal(err)
	}
	execSQL(t, dsn, `ALTER TABLE docs ADD COLUMN extra jsonb DEFAULT '{"d": true}'`)
	err := postgres.Run(ctx, cat, cfg)
	if !errors.Is(err, postgres.ErrAddedColumnDefault) || !strings.Contains(err.Error(), `"extra"`) ||
		!strings.Contains(err.Error(), "variant") {
		t.Fatalf("Run = %v, want ErrAddedColumnDefault naming extra and variant", err)
	}
}

// TestJSONColumnAddedMidStreamOnV3: ALTER TABLE ... ADD COLUMN j jsonb while streaming into a format v3 table
// adds j as a variant column (schema evolution), and every row reads back exactly: the rows from before it as
// NULL (no default), new rows and updated old rows with their documents, the JSON null as the variant null,
// SQL NULL as NULL. A jsonb column added with a default afterwards (Postgres shows it on every existing row, and
// the spec gives a variant no default but null) stops Run with ErrAddedColumnDefault naming it, before a row
// of the new shape reaches the table.
func TestJSONColumnAddedMidStreamOnV3(t *testing.T) {
	ctx := context.Background()
	dsn, slot := sourceDB(t)
	execSQL(t, dsn, "CREATE TABLE notes (id int PRIMARY KEY, note text)",
		"INSERT INTO notes SELECT i, 'n' || i FROM generate_series(1, 20) i")
	want := model{}
	for i := 1; i <= 20; i++ {
		want[fmt.Sprint(i)] = map[string]string{"id": fmt.Sprint(i), "note": fmt.Sprint("n", i)}
	}
	cat := openCatalog(t, catalogURI(t))
	p := startPipeline(t, cat, postgres.Config{DSN: dsn, Slot: slot, FlushInterval: 50 * time.Millisecond,
		CreateOptions: []iceberg.CreateOption{iceberg.FormatVersion(3)}})
	p.wait(t, "live-start")
	ident := table.Identifier{"public", "notes"}
	read := func() (model, error) { return readTable(ctx, cat, ident, "id") }
	p.converge(t, read, want)

	execSQL(t, dsn, "ALTER TABLE notes ADD COLUMN j jsonb")
	for _, row := range want {
		row["j"] = "NULL"
	}
	set := func(id int, j *string, insert bool) {
		sql := "NULL"
		if j != nil {
			sql = lit(*j)
		}
		if insert {
			execSQL(t, dsn, fmt.Sprintf("INSERT INTO notes VALUES (%d, 'new', %s)", id, sql))
			want[fmt.Sprint(id)] = map[string]string{"id": fmt.Sprint(id), "note": "new"}
		} else {
			execSQL(t, dsn, fmt.Sprintf("UPDATE notes SET j = %s WHERE id = %d", sql, id))
		}
		want[fmt.Sprint(id)]["j"] = variantWant(t, j)
	}
	for i := range len(jsonDocs) + 7 {
		set(100+i, doc(i), true)
	}
	big := bigDoc()
	set(200, &big, true)
	jsonNull := "null"
	set(1, doc(0), false)
	set(2, &jsonNull, false)
	set(3, doc(3), false)
	set(3, nil, false) // back to SQL NULL
	// An old row, j untouched: still NULL.
	execSQL(t, dsn, "UPDATE notes SET note = 'u' WHERE id = 4")
	want["4"]["note"] = "u"
	p.converge(t, read, want)
	tbl, err := cat.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := tbl.Schema().FindFieldByName("j"); !ok || !f.Type.Equals(ice.VariantType{}) {
		t.Fatalf("column j: %v, want variant", f.Type)
	}

	execSQL(t, dsn, `ALTER TABLE notes ADD COLUMN k jsonb DEFAULT '{"a": 1}'`, "INSERT INTO notes VALUES (300, 'k', NULL, '[2]')")
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case err := <-p.errc:
			if !errors.Is(err, postgres.ErrAddedColumnDefault) || !strings.Contains(err.Error(), `"k"`) {
				t.Fatalf("Run = %v, want ErrAddedColumnDefault naming k", err)
			}
			got, err := read()
			if err != nil {
				t.Fatal(err)
			}
			if d := diff(want, got); d != "" {
				t.Fatalf("after the stop: %s", d)
			}
			return
		case <-p.kick:
			if got, err := read(); err == nil && got["300"] != nil {
				t.Fatal("the pipeline went on past the column added with a default")
			}
		case <-timeout:
			t.Fatal("the pipeline neither stopped nor went on")
		}
	}
}
