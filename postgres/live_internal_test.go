package postgres

import (
	"context"
	"encoding/binary"
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
	if err := s.change(context.Background(), lt, "update", tuple(bin(int8Bytes(8)), unchangedToast), old); err != nil {
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
	err := s.change(context.Background(), lt, "update", tuple(bin(int8Bytes(8)), unchangedToast), nil)
	if err == nil || !strings.Contains(err.Error(), `"big"`) || !strings.Contains(err.Error(), "REPLICA IDENTITY FULL") {
		t.Fatalf("err = %v, want one naming big and REPLICA IDENTITY FULL", err)
	}
}
