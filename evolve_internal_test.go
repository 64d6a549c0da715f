package iceberg

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// BenchmarkEvolveForSeen measures Write's schema-evolution check for a batch schema already seen: by pointer,
// and by fingerprint (a new *arrow.Schema with the same fields, as decoders that build a schema per batch give).
func BenchmarkEvolveForSeen(b *testing.B) {
	fields := []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_us, Nullable: true}}
	target := arrow.NewSchema(fields, nil)
	w := &Writer{view: newTableView(memory.DefaultAllocator, &conformHooks{})}
	w.view.conf = w.view.newConformer(target, nil)
	conf := w.view.conformer()
	in := arrow.NewSchema(fields, nil)
	w.view.evo.remember(in, in.Fingerprint(), &seenEntry{target: target, conf: conf})
	ctx := context.Background()
	b.Run("pointer", func(b *testing.B) {
		for b.Loop() {
			if c, err := w.evolveFor(ctx, in); err != nil || c != conf {
				b.Fatal("miss")
			}
		}
	})
	same := arrow.NewSchema(fields, nil)
	b.Run("fingerprint", func(b *testing.B) {
		for b.Loop() {
			w.view.evo.seen.Delete(same)
			if c, err := w.evolveFor(ctx, same); err != nil || c != conf {
				b.Fatal("miss")
			}
		}
	})
}
