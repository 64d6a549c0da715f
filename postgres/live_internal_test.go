package postgres

import (
	"context"
	"encoding/binary"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"
)

// liveFixture is a live state over one table (id int8 key, big text) with its Relation message taken.
func liveFixture(t *testing.T) (*liveState, *liveTable) {
	t.Helper()
	ti := &tableInfo{oid: 1, schema: "public", name: "docs", key: []string{"id"}, cols: []column{{name: "id"}, {name: "big"}}}
	p := &pipeline{byOID: map[uint32]*tableInfo{1: ti}, mapper: &typeMapper{numPrec: 38, numScale: 18},
		cfg: Config{BatchRows: 1 << 20}}
	s := &liveState{p: p, rels: map[uint32]*liveTable{}}
	err := s.relation(context.Background(), &pglogrepl.RelationMessage{RelationID: 1, Columns: []*pglogrepl.RelationMessageColumn{
		{Name: "id", DataType: oidInt8, TypeModifier: -1}, {Name: "big", DataType: oidText, TypeModifier: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	return s, s.rels[1]
}

func tuple(cols ...*pglogrepl.TupleDataColumn) *pglogrepl.TupleData {
	return &pglogrepl.TupleData{ColumnNum: uint16(len(cols)), Columns: cols}
}

func bin(b []byte) *pglogrepl.TupleDataColumn {
	return &pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeBinary, Length: uint32(len(b)), Data: b}
}

func int8Bytes(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

var unchangedToast = &pglogrepl.TupleDataColumn{DataType: pglogrepl.TupleDataTypeToast}

func TestUpdateTakesUnchangedToastFromTheOldRow(t *testing.T) {
	s, lt := liveFixture(t)
	old := tuple(bin(int8Bytes(7)), bin([]byte("a long TOASTed value")))
	// A key-changing update (7 -> 8) that leaves big unchanged.
	if err := s.change(context.Background(), lt, "update", tuple(bin(int8Bytes(8)), unchangedToast), old, true); err != nil {
		t.Fatal(err)
	}
	rec := lt.b.record()
	defer rec.Release()
	sc := rec.Schema()
	get := func(name string) string {
		idx := sc.FieldIndices(name)
		if len(idx) == 0 {
			t.Fatalf("no column %s in %v", name, sc)
		}
		return rec.Column(idx[0]).(interface{ ValueStr(int) string }).ValueStr(0)
	}
	if got := get("big"); got != "a long TOASTed value" {
		t.Errorf("big = %q, want the old row's value", got)
	}
	if get("id") != "8" || get(beforePrefix+"id") != "7" || get(opColumn) != "update" {
		t.Errorf("id %s, before %s, op %s: want 8, 7, update", get("id"), get(beforePrefix+"id"), get(opColumn))
	}
}

func TestUnchangedToastWithoutOldRowNamesTheColumn(t *testing.T) {
	s, lt := liveFixture(t)
	err := s.change(context.Background(), lt, "update", tuple(bin(int8Bytes(8)), unchangedToast), nil, false)
	if err == nil || !strings.Contains(err.Error(), `"big"`) || !strings.Contains(err.Error(), "REPLICA IDENTITY FULL") {
		t.Fatalf("err = %v, want one naming big and REPLICA IDENTITY FULL", err)
	}
}

// TestNetChangesOfKeyMoves: one transaction's changes of a deferrable key, reduced to their net effect per key,
// with whole old rows (REPLICA IDENTITY FULL).
func TestNetChangesOfKeyMoves(t *testing.T) {
	row := func(id int64, v string) [][]byte { return [][]byte{int8Bytes(id), []byte(v)} }
	upd := func(oldID int64, oldV string, id int64, v string) heldChange {
		return heldChange{op: "update", old: row(oldID, oldV), vals: row(id, v), oldWhole: true}
	}
	for _, tc := range []struct {
		name string
		held []heldChange
		want []string // "op id v"
	}{
		{"shift", []heldChange{upd(1, "a", 2, "a"), upd(2, "b", 3, "b"), upd(3, "c", 4, "c")},
			[]string{"delete 1 ", "insert 2 a", "insert 3 b", "insert 4 c"}},
		{"swap", []heldChange{upd(1, "a", 2, "a"), upd(2, "b", 1, "b")}, []string{"insert 1 b", "insert 2 a"}},
		{"chain", []heldChange{upd(1, "a", 2, "a"), upd(2, "a", 3, "a")}, []string{"delete 1 ", "insert 3 a"}},
		{"cycle", []heldChange{upd(1, "a", 2, "a"), upd(2, "b", 3, "b"), upd(3, "c", 1, "c")},
			[]string{"insert 1 c", "insert 2 a", "insert 3 b"}},
		{"moved then deleted", []heldChange{upd(1, "a", 5, "a"), {op: "delete", old: row(5, "a"), oldWhole: true}},
			[]string{"delete 1 "}},
		{"deleted then inserted", []heldChange{{op: "delete", old: row(1, "a"), oldWhole: true}, {op: "insert", vals: row(1, "z")}},
			[]string{"insert 1 z"}},
		{"inserted then updated", []heldChange{{op: "insert", vals: row(7, "a")}, upd(7, "a", 7, "b")}, []string{"insert 7 b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := netChanges(tc.held, 2, []int{0}, false)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range out {
				got = append(got, c.op+" "+strconv.FormatInt(int64(binary.BigEndian.Uint64(c.vals[0])), 10)+" "+string(c.vals[1]))
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("net changes %q, want %q", got, tc.want)
			}
		})
	}
}
