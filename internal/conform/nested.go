package conform

import (
	"context"
	"math"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Nested values are checked and converted level by level, the way Parquet stores them: a slot under a null
// struct, list or map (at any depth) is not data. Its value, null or not, is never written, so a null there is
// legal even in a required field; a null in a required field whose ancestors are all valid is not, and must be
// caught here: pqarrow writes a required leaf without definition levels, so such a null shifts every later
// value of the column (one bad map value made row 100 read back row 3's value).
//
// A mask is the bitmap (offset 0, one bit per slot of the array it goes with) of the slots that are data. nil
// means every slot is: the common case, which costs no bitmap at all. Only structs pass a mask down: a list or
// map keeps just the elements of its slots that are data (listElements), so its children need none.

// Convert returns col as an array of the field's layout (the caller copies it and gives it the table's exact
// type with retype), possibly sharing the caller's buffers. mask says which slots of col are data. Struct fields
// are matched by name (missing optional ones filled with nulls), lists of any kind become the table's list
// holding only the elements of its slots that are data, map keys and values are converted like any field, and
// primitives take the lossless casts of castable. path names the field in Iceberg's terms (list elements
// "element", map entries "key" and "value") for errors and for relaxing the field.
func (c *Conformer) Convert(ctx context.Context, path []string, tf arrow.Field, col arrow.Array, mask []byte) (arrow.Array, error) {
	if !tf.Nullable {
		if n := nullsInData(col, mask); n > 0 {
			return nil, rowErr(path, true, ErrNullInRequired, "%d null value(s)", n)
		}
	}
	inType := col.DataType()
	mismatch := func() error {
		return ColumnErr(strings.Join(path, "."), ErrTypeMismatch, "got %s, the table has %s", inType, tf.Type)
	}
	switch tt := tf.Type.(type) {
	case *arrow.StructType:
		sa, ok := col.(*array.Struct)
		if !ok {
			return nil, mismatch()
		}
		return c.convertStruct(ctx, path, tt, sa, mask)
	case *arrow.ListType:
		switch col.(type) {
		case *array.List, *array.LargeList, *array.FixedSizeList:
		default: // a map is a list too, but not one of the table's lists
			return nil, mismatch()
		}
		return c.convertList(ctx, path, tt, col.(array.ListLike), mask)
	case *arrow.MapType:
		ma, ok := col.(*array.Map)
		if !ok {
			return nil, mismatch()
		}
		return c.convertMap(ctx, path, tt, ma, mask)
	}
	if va, ok := col.(*extensions.VariantArray); ok {
		if err := checkVariants(path, va, mask); err != nil {
			return nil, err
		}
	}
	if arrow.TypeEqual(inType, tf.Type) {
		col.Retain()
		return col, nil
	}
	if !castable(inType, tf.Type) {
		return nil, mismatch()
	}
	cctx := compute.WithAllocator(ctx, c.mem)
	casted, err := compute.CastArray(cctx, col, compute.SafeCastOptions(tf.Type))
	if err != nil && mask != nil {
		// The value that does not fit may sit under a null parent, where it is not data: cast again with those
		// slots null.
		masked := withValidity(c.mem, col, validData(col, mask))
		casted, err = compute.CastArray(cctx, masked, compute.SafeCastOptions(tf.Type))
		masked.Release()
	}
	if err != nil {
		return nil, rowErr(path, false, ErrTypeMismatch, "cannot convert %s to %s: %v", inType, tf.Type, err)
	}
	return casted, nil
}

// convertStruct builds the table's struct from the caller's by field name. The struct's children are already
// sliced to its offset and length by arrow-go (array.Struct.Field).
func (c *Conformer) convertStruct(ctx context.Context, path []string, tt *arrow.StructType, sa *array.Struct, mask []byte) (arrow.Array, error) {
	st := sa.DataType().(*arrow.StructType)
	n := sa.Len()
	for _, f := range st.Fields() {
		if _, ok := tt.FieldIdx(f.Name); !ok {
			return nil, ColumnErr(strings.Join(append(slices.Clone(path), f.Name), "."), ErrUnknownColumn,
				"the table's struct has fields %s", FieldNames(arrow.NewSchema(tt.Fields(), nil)))
		}
	}
	children := make([]arrow.ArrayData, tt.NumFields())
	defer releaseData(children)
	childMask := validData(sa, mask)
	for i, cf := range tt.Fields() {
		cpath := append(slices.Clone(path), cf.Name)
		idx, ok := st.FieldIdx(cf.Name)
		if !ok {
			if !cf.Nullable && c.defaults.Of(cf) == nil {
				return nil, ColumnErr(strings.Join(cpath, "."), ErrMissingColumn, "the batch's struct has no such field")
			}
			filled, err := c.missing(cpath, cf, n)
			if err != nil {
				return nil, err
			}
			children[i] = filled.Data()
			children[i].Retain()
			filled.Release()
			continue
		}
		conv, err := c.Convert(ctx, cpath, cf, sa.Field(idx), childMask)
		if err != nil {
			return nil, err
		}
		children[i] = conv.Data()
		children[i].Retain()
		conv.Release()
	}
	bitmap := copyValidity(c.mem, sa)
	if bitmap != nil {
		defer bitmap.Release()
	}
	data := array.NewData(tt, n, []*memory.Buffer{bitmap}, children, sa.NullN(), 0)
	defer data.Release()
	return array.MakeFromData(data), nil
}

// convertList builds the table's list from a list, large list or fixed-size list: the elements of the slots
// that are data (listElements), converted as the table's element field.
func (c *Conformer) convertList(ctx context.Context, path []string, tt *arrow.ListType, la array.ListLike, mask []byte) (arrow.Array, error) {
	epath := append(slices.Clone(path), "element")
	elems, offsets, err := c.listElements(epath, la, mask)
	if err != nil {
		return nil, err
	}
	defer elems.Release()
	defer offsets.Release()
	conv, err := c.Convert(ctx, epath, tt.ElemField(), elems, nil)
	if err != nil {
		return nil, err
	}
	defer conv.Release()
	return c.listLike(tt, la, offsets, conv.Data()), nil
}

// convertMap builds the table's map from the caller's: keys and values are converted as fields named "key" and
// "value" (Iceberg's names), whatever the caller's entry fields are called. Keys are always required in
// Iceberg; a null key is reported as such and never relaxed by schema evolution (arrow-go refuses to build a
// map with a null key or entry, so that check is only a safeguard for arrays made by other means).
func (c *Conformer) convertMap(ctx context.Context, path []string, tt *arrow.MapType, ma *array.Map, mask []byte) (arrow.Array, error) {
	kpath := append(slices.Clone(path), "key")
	vpath := append(slices.Clone(path), "value")
	ents, offsets, err := c.listElements(kpath, ma, mask)
	if err != nil {
		return nil, err
	}
	defer ents.Release()
	defer offsets.Release()
	sa, ok := ents.(*array.Struct)
	if !ok || sa.NumField() != 2 {
		return nil, ColumnErr(strings.Join(path, "."), ErrTypeMismatch, "got %s, the table has %s", ma.DataType(), tt)
	}
	// A null entry has neither key nor value: report it as a null key.
	if n := sa.NullN(); n > 0 {
		return nil, rowErr(kpath, false, ErrNullInRequired, "%d null map entr(y/ies)", n)
	}
	keys, vals := sa.Field(0), sa.Field(1)
	if n := keys.NullN(); n > 0 {
		return nil, rowErr(kpath, false, ErrNullInRequired, "%d null map key(s)", n)
	}
	kconv, err := c.Convert(ctx, kpath, tt.KeyField(), keys, nil)
	if err != nil {
		return nil, err
	}
	defer kconv.Release()
	vconv, err := c.Convert(ctx, vpath, tt.ItemField(), vals, nil)
	if err != nil {
		return nil, err
	}
	defer vconv.Release()
	// The entries carry no validity of their own (Arrow's map entries are never null).
	entries := array.NewData(tt.Elem(), sa.Len(), []*memory.Buffer{nil}, []arrow.ArrayData{kconv.Data(), vconv.Data()}, 0, 0)
	defer entries.Release()
	return c.listLike(tt, ma, offsets, entries), nil
}

// listElements returns the elements of a list-like array that are data, with int32 offsets onto them (one per
// slot, plus the end). The elements are cut to the range the slots cover (a slice of a list array still holds
// every element of the original). A slot that is null, or hidden by a null ancestor, must cover no element:
// Arrow allows a null list to cover a range (a fixed-size list always does), but pqarrow refuses to write one
// ("lists with non-zero length null components"), and finding that out while encoding would stop the writer.
// Such slots are emptied and the elements of the others gathered (with array.Concatenate over runs of
// consecutive ones), so every element returned is data: the children need no mask.
func (c *Conformer) listElements(epath []string, la array.ListLike, mask []byte) (arrow.Array, *memory.Buffer, error) {
	n := la.Len()
	var lo, hi int64
	if n > 0 {
		lo, _ = la.ValueOffsets(0)
		_, hi = la.ValueOffsets(n - 1)
	}
	if hi-lo > math.MaxInt32 {
		return nil, nil, rowErr(epath, false, ErrTypeMismatch, "%d elements in one batch, over the table list's int32 offsets", hi-lo)
	}
	offsets := memory.NewResizableBuffer(c.mem)
	offsets.Resize(arrow.Int32Traits.BytesRequired(n + 1))
	offs := arrow.Int32Traits.CastFromBytes(offsets.Bytes())
	for i := range n {
		start, _ := la.ValueOffsets(i)
		offs[i] = int32(start - lo)
	}
	offs[n] = int32(hi - lo)
	elems := array.NewSlice(la.ListValues(), lo, hi)
	slotMask := validData(la, mask)
	covers := func(i int) bool { return offs[i+1] > offs[i] && !bitutil.BitIsSet(slotMask, i) }
	if slotMask == nil || !anySlot(n, covers) {
		return elems, offsets, nil
	}
	// Gather the elements of the slots that are data, run by run, and rewrite the offsets onto them.
	var runs []arrow.Array
	defer func() {
		for _, r := range runs {
			r.Release()
		}
	}()
	runStart, runEnd, next := int32(-1), int32(-1), int32(0)
	flush := func() {
		if runEnd > runStart {
			runs = append(runs, array.NewSlice(elems, int64(runStart), int64(runEnd)))
		}
	}
	for i := range n {
		start, end := offs[i], offs[i+1]
		offs[i] = next
		if end == start || !bitutil.BitIsSet(slotMask, i) {
			continue
		}
		if start != runEnd {
			flush()
			runStart = start
		}
		runEnd = end
		next += end - start
	}
	flush()
	offs[n] = next
	var gathered arrow.Array
	var err error
	switch len(runs) {
	case 0:
		gathered = array.NewSlice(elems, 0, 0)
	case 1:
		gathered = runs[0]
		gathered.Retain()
	default:
		gathered, err = array.Concatenate(runs, c.mem)
	}
	elems.Release()
	if err != nil {
		offsets.Release()
		return nil, nil, ColumnErr(strings.Join(epath, "."), err, "")
	}
	return gathered, offsets, nil
}

// anySlot reports whether f holds for some slot in [0, n).
func anySlot(n int, f func(int) bool) bool {
	for i := range n {
		if f(i) {
			return true
		}
	}
	return false
}

// listLike assembles a list or map of type t from the caller's array (for its validity), the rebased offsets
// and the converted child.
func (c *Conformer) listLike(t arrow.DataType, la arrow.Array, offsets *memory.Buffer, child arrow.ArrayData) arrow.Array {
	bitmap := copyValidity(c.mem, la)
	if bitmap != nil {
		defer bitmap.Release()
	}
	data := array.NewData(t, la.Len(), []*memory.Buffer{bitmap, offsets}, []arrow.ArrayData{child}, la.NullN(), 0)
	defer data.Release()
	return array.MakeFromData(data)
}

// nullsInData counts the slots of col that are data (set in mask, or all when mask is nil) and null.
func nullsInData(col arrow.Array, mask []byte) int {
	nulls := col.NullN()
	if nulls == 0 || mask == nil {
		return nulls
	}
	n := col.Len()
	valid := col.NullBitmapBytes()
	if valid == nil { // every slot is null (the null type)
		return bitutil.CountSetBits(mask, 0, n)
	}
	out := make([]byte, bitutil.BytesForBits(int64(n)))
	bitutil.BitmapAndNot(mask, valid, 0, int64(col.Data().Offset()), out, 0, int64(n))
	return bitutil.CountSetBits(out, 0, n)
}

// validData returns the mask of the slots of col that are data and valid, which is the mask of col's children.
// It is nil when every slot is both.
func validData(col arrow.Array, mask []byte) []byte {
	if col.NullN() == 0 {
		return mask
	}
	n := int64(col.Len())
	out := make([]byte, bitutil.BytesForBits(n))
	valid := col.NullBitmapBytes()
	switch {
	case valid == nil: // every slot is null
	case mask == nil:
		bitutil.CopyBitmap(valid, col.Data().Offset(), int(n), out, 0)
	default:
		bitutil.BitmapAnd(mask, valid, 0, int64(col.Data().Offset()), out, 0, n)
	}
	return out
}

// copyValidity copies col's validity bitmap (from its offset) into a buffer of mem; nil when it has no nulls.
func copyValidity(mem memory.Allocator, col arrow.Array) *memory.Buffer {
	if col.NullN() == 0 {
		return nil
	}
	n := col.Len()
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(int(bitutil.BytesForBits(int64(n))))
	if valid := col.NullBitmapBytes(); valid != nil {
		bitutil.CopyBitmap(valid, col.Data().Offset(), n, buf.Bytes(), 0)
	} else {
		clear(buf.Bytes())
	}
	return buf
}

// withValidity returns a primitive array with col's values and the given validity (offset 0; nil: all valid).
// Values and bitmap share one offset in Arrow, so col is first copied to offset 0 when it is a slice.
func withValidity(mem memory.Allocator, col arrow.Array, valid []byte) arrow.Array {
	src := col
	if col.Data().Offset() != 0 {
		cp, err := array.Concatenate([]arrow.Array{col}, mem)
		if err != nil {
			col.Retain() // the cast will fail again and report it
			return col
		}
		src = cp
	} else {
		src.Retain()
	}
	defer src.Release()
	n := src.Len()
	buffers := slices.Clone(src.Data().Buffers())
	var bitmap *memory.Buffer
	nulls := 0
	if valid != nil {
		bitmap = memory.NewResizableBuffer(mem)
		bitmap.Resize(int(bitutil.BytesForBits(int64(n))))
		copy(bitmap.Bytes(), valid)
		defer bitmap.Release()
		nulls = n - bitutil.CountSetBits(valid, 0, n)
	}
	buffers[0] = bitmap
	data := array.NewData(src.DataType(), n, buffers, src.Data().Children(), nulls, 0)
	defer data.Release()
	return array.MakeFromData(data)
}

// releaseData releases the non-nil entries.
func releaseData(ds []arrow.ArrayData) {
	for _, d := range ds {
		if d != nil {
			d.Release()
		}
	}
}
