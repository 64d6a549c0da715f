package evolve

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// seenFields are the fields of the schemas the Seen tests look up.
var seenFields = []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_us, Nullable: true}}

// TestSeen: a schema remembered against a table schema is found by pointer and, as a new *arrow.Schema with the
// same fields, by fingerprint; never against another table schema.
func TestSeen(t *testing.T) {
	var s Seen[int]
	target, in := arrow.NewSchema(seenFields, nil), arrow.NewSchema(seenFields, nil)
	c, fp, ok := s.Lookup(in, target)
	if ok || fp == "" {
		t.Fatalf("empty cache: %d, %q, %v", c, fp, ok)
	}
	s.Remember(in, fp, target, 7)
	same := arrow.NewSchema(seenFields, nil)
	for _, sc := range []*arrow.Schema{in, same, same} {
		if c, _, ok := s.Lookup(sc, target); !ok || c != 7 {
			t.Fatalf("lookup: %d, %v, want 7", c, ok)
		}
	}
	if _, _, ok := s.Lookup(in, arrow.NewSchema(seenFields[:1], nil)); ok {
		t.Fatal("found against another table schema")
	}
}

// BenchmarkSeenLookup measures the schema-evolution check of Write for a batch schema already seen: by pointer,
// and by fingerprint (a new *arrow.Schema with the same fields, as decoders that build a schema per batch give).
func BenchmarkSeenLookup(b *testing.B) {
	var s Seen[int]
	target, in := arrow.NewSchema(seenFields, nil), arrow.NewSchema(seenFields, nil)
	s.Remember(in, in.Fingerprint(), target, 1)
	b.Run("pointer", func(b *testing.B) {
		for b.Loop() {
			if _, _, ok := s.Lookup(in, target); !ok {
				b.Fatal("miss")
			}
		}
	})
	same := arrow.NewSchema(seenFields, nil)
	b.Run("fingerprint", func(b *testing.B) {
		for b.Loop() {
			s.seen.Delete(same)
			if _, _, ok := s.Lookup(same, target); !ok {
				b.Fatal("miss")
			}
		}
	})
}
