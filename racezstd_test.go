//go:build race

package iceberg_test

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/zstd"
)

// Under the race detector, this test binary compresses Parquet pages with one shared zstd encoder per level
// instead of arrow-go's sync.Pool of encoders. The race detector drops a quarter of a sync.Pool's Puts by
// design, and every encoder arrow-go then builds (two encoder states of about a megabyte each) is a
// race-instrumented allocation: a test committing 80 small files spent about a fifth of its CPU on them. The
// pages are byte-identical (arrow-go's encoder options; klauspost's EncodeAll is safe for concurrent calls).
// Builds without -race use arrow-go's codec, as users do.
func init() {
	arrowZstd, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		panic(err)
	}
	compress.RegisterCodec(compress.Codecs.Zstd, sharedZstd{Codec: arrowZstd})
	// The levels the tables use (default, and 1 for the benchmarks' zstd level-1 streams), built now: a test
	// that measures the heap over its files (TestFileMetadataMemory) would otherwise count the encoder states
	// and their buffers growing on first use, which stay for the process.
	// Each encoder state is warmed with a page of a megabyte, so that its buffers have their full size.
	page := make([]byte, 1<<20)
	for i := range page {
		page[i] = byte(i * 7 % 251)
	}
	for _, level := range []int{compress.DefaultCompressionLevel, 1} {
		var wg sync.WaitGroup
		for range runtime.GOMAXPROCS(0) {
			wg.Go(func() { sharedZstd{}.EncodeLevel(nil, page, level) })
		}
		wg.Wait()
	}
}

// sharedZstd is arrow-go's zstd codec with EncodeLevel on shared encoders; the rest is arrow-go's.
type sharedZstd struct{ compress.Codec }

var sharedZstdEncoders sync.Map // zstd.EncoderLevel → *zstd.Encoder

func (sharedZstd) EncodeLevel(dst, src []byte, level int) []byte {
	l := zstd.EncoderLevelFromZstd(level)
	if level == compress.DefaultCompressionLevel {
		l = zstd.SpeedDefault
	}
	enc, ok := sharedZstdEncoders.Load(l)
	if !ok {
		// arrow-go's options (parquet/compress/zstd.go), with one encoder state per P instead of per call.
		e, err := zstd.NewWriter(nil, zstd.WithZeroFrames(true), zstd.WithEncoderLevel(l),
			zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithAllLitEntropyCompression(true))
		if err != nil {
			panic(err)
		}
		enc, _ = sharedZstdEncoders.LoadOrStore(l, e)
	}
	return enc.(*zstd.Encoder).EncodeAll(src, dst[:0])
}

// TestSharedZstdMatchesArrow: the shared encoders write the bytes arrow-go's codec writes, at each level the
// tables use (default, 1, 3, 9) and for pages from a few bytes to several blocks.
func TestSharedZstdMatchesArrow(t *testing.T) {
	registered, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	shared, ok := registered.(sharedZstd)
	if !ok {
		t.Fatalf("registered zstd codec is %T, want sharedZstd", registered)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 100, 64 << 10, 300 << 10} {
		page := make([]byte, n)
		for i := range page {
			page[i] = byte(rng.IntN(16)) // compressible, not trivially
		}
		for _, level := range []int{compress.DefaultCompressionLevel, 1, 3, 9} {
			want := shared.Codec.EncodeLevel(nil, page, level)
			if got := shared.EncodeLevel(nil, page, level); !bytes.Equal(got, want) {
				t.Errorf("%d bytes at level %d: %d compressed bytes differ from arrow-go's %d", n, level, len(got), len(want))
			}
		}
	}
}
