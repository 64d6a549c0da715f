package iceberg

import (
	"fmt"
	"testing"

	"github.com/google/uuid"
)

// TestOrphanFileNamer: a stable writer's write UUIDs are unique per call and name an earlier epoch of the same
// ID on the same table, and nothing else: not the current or a later epoch, another ID, another table, random
// UUIDs, or a mark outside the file's base name.
func TestOrphanFileNamer(t *testing.T) {
	tableA, tableB := uuid.New(), uuid.New()
	old := newFileNamer(tableA, "job", 6)
	now := newFileNamer(tableA, "job", 7)
	seen := map[uuid.UUID]bool{}
	for range 1000 {
		u := old.next()
		if seen[u] || u.Version() != 8 || u.Variant() != uuid.RFC4122 {
			t.Fatalf("write UUID %s: repeated (%v) or not a version-8 RFC 9562 UUID", u, seen[u])
		}
		seen[u] = true
	}
	name := func(n *fileNamer) string {
		return fmt.Sprintf("file:///w/ns.db/t/data/day=2026-01-01/00000-0-%s-00001.parquet", n.next())
	}
	cases := []struct {
		what  string
		file  string
		yours bool
	}{
		{"an earlier epoch of the ID", name(old), true},
		{"epoch 1 of the ID", name(newFileNamer(tableA, "job", 1)), true},
		{"an earlier epoch's deletion vector", "s3://b/t/data/icewriter-dv-" + old.next().String() + ".puffin", true},
		{"an object-store path", "s3://b/t/data/0110/1010/0101/10110011-00000-0-" + old.next().String() + "-00001.parquet", true},
		{"the current epoch", name(now), false},
		{"a later epoch", name(newFileNamer(tableA, "job", 8)), false},
		{"another ID", name(newFileNamer(tableA, "job2", 6)), false},
		{"the same ID on another table", name(newFileNamer(tableB, "job", 6)), false},
		{"a random UUID", name(nil), false},
		{"a mark in a folder name", "file:///w/t/data/" + old.next().String() + "/00000-0-" + uuid.NewString() + "-00001.parquet", false},
		{"no UUID", "file:///w/t/data/part-1.parquet", false},
	}
	for _, c := range cases {
		if got := now.earlier(c.file); got != c.yours {
			t.Errorf("%s: earlier(%s) = %v, want %v", c.what, c.file, got, c.yours)
		}
	}
	if newFileNamer(tableA, "job", 1<<32) != nil || newFileNamer(tableA, "job", 0) != nil {
		t.Error("an epoch outside 1..2^32-1 must leave files unmarked (nil namer)")
	}
	var none *fileNamer
	if none.earlier(name(old)) || none.next().Version() != 4 {
		t.Error("a nil namer must hand out random UUIDs and claim no file")
	}
}
