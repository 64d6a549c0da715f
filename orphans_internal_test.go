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

// TestOrphanPathKeys: locations compare without scheme and authority, cleaned, escaped or not, so that a file
// referenced under another spelling is never taken for an orphan.
func TestOrphanPathKeys(t *testing.T) {
	refs := refSet{}
	for _, p := range []string{"file:///w/t/data/a.parquet", "s3a://bucket/t/data/x=a%20b/b.parquet", "/w/t/data/c.parquet",
		"s3://bucket/t/data/d e.parquet"} {
		refs.add(p)
	}
	for _, c := range []struct {
		path string
		ref  bool
	}{
		{"file:///w/t/data/a.parquet", true},
		{"/w/t/data/a.parquet", true},
		{"file:/w/t/data/a.parquet", true},
		{"s3://bucket/t/data/x=a b/b.parquet", true},
		{"s3://other.endpoint/t/data/x=a%20b/b.parquet", true},
		{"file:///w/t/data//c.parquet", true},
		{"s3://bucket/t/data/d%20e.parquet", true},
		{"file:///w/t/data/a.parquet.tmp", false},
		{"file:///w/t2/data/a.parquet", false},
	} {
		if got := refs.has(c.path); got != c.ref {
			t.Errorf("has(%s) = %v, want %v", c.path, got, c.ref)
		}
	}
	if !under("file:///w/t/data/x/y", "file:///w/t/data") || under("file:///w/t/data2/y", "file:///w/t/data") ||
		!under("s3://b/t/metadata/v1.json", "s3://b/t/metadata/") {
		t.Error("under must compare whole folders")
	}
}
