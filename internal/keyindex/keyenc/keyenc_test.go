package keyenc

import (
	"bytes"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestEncoder: keys are equal exactly when their columns' values are (a null apart from every value), a
// float32 key encodes as the float64 it promotes to, an integer key as AppendInt does, and a column that cannot
// be a key is refused with ErrTypeMismatch.
func TestEncoder(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	ib := array.NewInt64Builder(mem)
	defer ib.Release()
	ib.AppendValues([]int64{7, 0, 7}, []bool{true, false, true})
	ints := ib.NewInt64Array()
	defer ints.Release()
	sb := array.NewStringBuilder(mem)
	defer sb.Release()
	sb.AppendValues([]string{"ab", "", "ab"}, nil)
	strs := sb.NewStringArray()
	defer strs.Release()
	enc, err := NewEncoder([]arrow.Array{ints, strs})
	if err != nil {
		t.Fatal(err)
	}
	k0, k1, k2 := enc.AppendKey(nil, 0), enc.AppendKey(nil, 1), enc.AppendKey(nil, 2)
	if !bytes.Equal(k0, k2) || bytes.Equal(k0, k1) {
		t.Fatalf("keys %x, %x, %x: want the first and last equal, the null one apart", k0, k1, k2)
	}
	if Hash(k0) != Hash(k2) {
		t.Fatal("equal keys hash apart")
	}
	one, err := NewEncoder([]arrow.Array{ints})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := one.AppendKey(nil, 0), AppendInt(nil, 7); !bytes.Equal(got, want) {
		t.Fatalf("int64 key %x, AppendInt %x", got, want)
	}
	f32b := array.NewFloat32Builder(mem)
	defer f32b.Release()
	f32b.Append(1.5)
	f32 := f32b.NewFloat32Array()
	defer f32.Release()
	f64b := array.NewFloat64Builder(mem)
	defer f64b.Release()
	f64b.Append(1.5)
	f64 := f64b.NewFloat64Array()
	defer f64.Release()
	e32, err := NewEncoder([]arrow.Array{f32})
	if err != nil {
		t.Fatal(err)
	}
	e64, err := NewEncoder([]arrow.Array{f64})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(e32.AppendKey(nil, 0), e64.AppendKey(nil, 0)) {
		t.Fatal("a float32 key encodes apart from the float64 it promotes to")
	}
	if err := CheckType(arrow.ListOf(arrow.PrimitiveTypes.Int64)); !errors.Is(err, ErrTypeMismatch) {
		t.Fatalf("a list key column: %v, want ErrTypeMismatch", err)
	}
	if err := CheckType(arrow.BinaryTypes.String); err != nil {
		t.Fatal(err)
	}
}
