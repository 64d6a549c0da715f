package tabletest

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/icewriter/iceberg/internal/keyindex/keyenc"
)

// EncodedKey is the keyenc.Encoder encoding of an int64 key, as Apply and the versions of keys see it.
func EncodedKey(t testing.TB, id int64) []byte {
	t.Helper()
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	b.Append(id)
	col := b.NewArray()
	defer col.Release()
	enc, err := keyenc.NewEncoder([]arrow.Array{col})
	if err != nil {
		t.Fatal(err)
	}
	return enc.AppendKey(nil, 0)
}
