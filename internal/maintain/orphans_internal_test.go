package maintain

import "testing"

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
	if !Under("file:///w/t/data/x/y", "file:///w/t/data") || Under("file:///w/t/data2/y", "file:///w/t/data") ||
		!Under("s3://b/t/metadata/v1.json", "s3://b/t/metadata/") {
		t.Error("under must compare whole folders")
	}
}
