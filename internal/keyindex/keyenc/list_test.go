package keyenc

import "testing"

// TestKeyList: keys of one width are held without offsets; the first key of another width keeps every key
// readable.
func TestKeyList(t *testing.T) {
	var l List
	want := []string{"abc", "def", "ghi", "jk", "", "lmnop", "qrs"}
	for i, k := range want {
		l.Add([]byte(k))
		if i == 2 && l.ends != nil {
			t.Fatal("offsets for keys of one width")
		}
	}
	if l.Len() != len(want) {
		t.Fatalf("%d keys, want %d", l.Len(), len(want))
	}
	for i, k := range l.All() {
		if string(k) != want[i] {
			t.Fatalf("key %d = %q, want %q", i, k, want[i])
		}
	}
}
