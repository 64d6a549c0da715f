package conform

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/variant"
	"github.com/google/uuid"

	"github.com/icewriter/iceberg/internal/benchpair"
	"github.com/icewriter/iceberg/shred"
)

// variantObjects is a variant column of n objects of 7 keys (drawn from 100) with a nested array and object, as
// shred builds them.
func variantObjects(tb testing.TB, n int) *extensions.VariantArray {
	r := rand.New(rand.NewPCG(1, 2))
	vb := extensions.NewVariantBuilder(memory.DefaultAllocator, extensions.NewDefaultVariantType())
	defer vb.Release()
	for range n {
		first := r.IntN(100)
		doc := fmt.Appendf(nil, `{"k%02d": %d, "k%02d": "s-%d", "k%02d": %.2f, "k%02d": true, "k%02d": null, "k%02d": [1, "x"], "k%02d": {"a": 1}}`,
			first, r.IntN(1000), (first+7)%100, r.IntN(1000), (first+14)%100, r.Float64()*100, (first+21)%100,
			(first+28)%100, (first+35)%100, (first+42)%100)
		if err := shred.AppendVariantJSON(vb, doc); err != nil {
			tb.Fatal(err)
		}
	}
	return vb.NewArray().(*extensions.VariantArray)
}

// arrowVariantValid is arrow-go's verdict on a plain variant, a panic as invalid.
func arrowVariantValid(meta, value []byte) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	_, err := variant.New(meta, value)
	return err == nil
}

// deepSeed is the seed of variantSeeds nested past fastDepth.
const deepSeed = 17

// variantSeeds are plain variants of every kind: primitives, short and long strings, large objects and arrays,
// wide offsets, nesting, and the variant built from Go values.
func variantSeeds(t testing.TB) [][2][]byte {
	docs := []string{`null`, `true`, `1`, `-300`, `70000`, `5000000000`, `1.5`, `12345678901.25`,
		`123456789012345678901234567.5`, `1e300`, `"s"`, `"` + strings.Repeat("x", 100) + `"`, `{}`, `[]`,
		`{"a": {"b": [1, {"c": null}]}, "d": [[], {}]}`, `[` + strings.Repeat(`"v",`, 300) + `1]`,
		`{"k": "` + strings.Repeat("y", 70000) + `", "a": 1}`,
		strings.Repeat(`[`, 70) + strings.Repeat(`]`, 70)}
	var b strings.Builder
	b.WriteString("{")
	for i := range 300 {
		fmt.Fprintf(&b, `"key%03d": %d,`, i, i)
	}
	b.WriteString(`"z": null}`)
	docs = append(docs, b.String())
	if !strings.HasPrefix(docs[deepSeed], strings.Repeat("[", fastDepth+1)) {
		t.Fatalf("seed %d is not the deep one", deepSeed)
	}
	vb := extensions.NewVariantBuilder(memory.DefaultAllocator, extensions.NewDefaultVariantType())
	defer vb.Release()
	for _, d := range docs {
		if err := shred.AppendVariantJSON(vb, []byte(d)); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []any{time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC), uuid.New(), []byte("bin"), float32(1.5),
		map[string]any{"t": time.Date(2024, 1, 2, 3, 4, 5, 6000, time.UTC)}} {
		if err := shred.AppendVariant(vb, v); err != nil {
			t.Fatal(err)
		}
	}
	arr := vb.NewArray().(*extensions.VariantArray)
	defer arr.Release()
	metas, values, ok := plainVariant(arr)
	if !ok {
		t.Fatal("not a plain variant array")
	}
	var out [][2][]byte
	for i := range arr.Len() {
		out = append(out, [2][]byte{metas.Value(i), values.Value(i)})
	}
	return out
}

// TestVariantCheckAgreesWithArrow: the fast check accepts every variant shred builds (unless nested deeper than
// it follows) and, on those and on every corruption of one byte of them, never accepts what arrow-go refuses.
func TestVariantCheckAgreesWithArrow(t *testing.T) {
	for i, s := range variantSeeds(t) {
		var c variantCheck
		if ok := c.valid(s[0], s[1]); ok != (i != deepSeed) {
			t.Errorf("seed %d: accepted %v (seed %d nests past fastDepth, the others do not)", i, ok, deepSeed)
		}
		for _, which := range []int{0, 1} {
			for p := range min(len(s[which]), 200) {
				for _, x := range []byte{0x01, 0x02, 0x04, 0x10, 0x40, 0xff} {
					m, v := append([]byte(nil), s[0]...), append([]byte(nil), s[1]...)
					if which == 0 {
						m[p] ^= x
					} else {
						v[p] ^= x
					}
					var c variantCheck
					if c.valid(m, v) && !arrowVariantValid(m, v) {
						t.Fatalf("seed %d, byte %d of %s ^ %#x: accepted, arrow-go refuses", i, p, []string{"metadata", "value"}[which], x)
					}
				}
			}
		}
	}
}

// FuzzVariantCheck: whatever the bytes, the fast check accepts only what arrow-go's variant.New accepts, and
// does not panic. (What it refuses goes to arrow-go in checkVariants: refusing more costs time, never a row.)
func FuzzVariantCheck(f *testing.F) {
	for _, s := range variantSeeds(f) {
		if len(s[1]) < 4096 {
			f.Add(s[0], s[1])
		}
	}
	f.Fuzz(func(t *testing.T, meta, value []byte) {
		var c variantCheck
		if c.valid(meta, value) && !arrowVariantValid(meta, value) {
			t.Fatalf("accepted, arrow-go refuses: meta %x value %x", meta, value)
		}
	})
}

// BenchmarkVariantCheckPair checks 1,000 rows of 7-key objects (shred's) with checkVariants (the fast check) and
// with arrow-go's variant.New per row (the check before it), in pairs: x-arrow above 1 means checkVariants is
// faster (the median of the paired ratios, so a shared machine's load falls on both sides of each pair).
func BenchmarkVariantCheckPair(b *testing.B) {
	va := variantObjects(b, 1000)
	defer va.Release()
	metas, values, _ := plainVariant(va)
	var base, x []float64
	for b.Loop() {
		start := time.Now()
		for i := range va.Len() {
			if _, err := variant.New(metas.Value(i), values.Value(i)); err != nil {
				b.Fatal(err)
			}
		}
		base = append(base, time.Since(start).Seconds())
		start = time.Now()
		if err := checkVariants([]string{"v"}, va, nil); err != nil {
			b.Fatal(err)
		}
		x = append(x, time.Since(start).Seconds())
	}
	b.ReportMetric(benchpair.Ratio(base, x), "x-arrow")
	b.ReportMetric(benchpair.Median(x)*1e9/float64(va.Len()), "ns/row")
}
