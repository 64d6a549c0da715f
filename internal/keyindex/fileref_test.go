package keyindex

import (
	"fmt"
	"testing"
)

// RowIDs keeps ids by position, forgets those of dead rows, and gives its capacity back once at most half is
// left: the budget counts its Bytes.
func TestRowIDs(t *testing.T) {
	m := map[int32]int64{}
	for p := range int32(8) {
		m[p*2] = 100 + int64(p)
	}
	l := NewRowIDs(m)
	if l.Len() != 8 || l.Bytes() != 8*12 {
		t.Fatalf("%d ids in %d bytes, want 8 in 96", l.Len(), l.Bytes())
	}
	if id, ok := l.Get(6); !ok || id != 103 {
		t.Fatalf("Get(6) = %d %v, want 103", id, ok)
	}
	if _, ok := l.Get(7); ok {
		t.Fatal("Get(7): a position without an id answered")
	}
	l.Drop(func(p int32) bool { return p == 0 })
	if l.Len() != 7 || l.Bytes() != 8*12 {
		t.Fatalf("one dropped: %d ids in %d bytes, want 7 in 96 (no shrink yet)", l.Len(), l.Bytes())
	}
	l.Drop(func(p int32) bool { return p < 10 })
	if got := fmt.Sprint(l.pos, l.id); l.Len() != 3 || l.Bytes() >= 8*12 || got != "[10 12 14] [105 106 107]" {
		t.Fatalf("five more dropped: %s in %d bytes, want [10 12 14] [105 106 107] in less than 96", got, l.Bytes())
	}
	l.Drop(func(int32) bool { return true })
	if l.Len() != 0 || l.Bytes() != 0 {
		t.Fatalf("all dropped: %d ids in %d bytes", l.Len(), l.Bytes())
	}
}
