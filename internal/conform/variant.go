package conform

import (
	"bytes"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/parquet/variant"
)

// checkVariants returns a *ColumnError (row-level, so a dead letter handler can take the row) for the first data
// slot of va (mask as Convert takes it) whose variant does not decode: metadata or value bytes that are not a
// variant would be written as they are and fail every reader of the file.
func checkVariants(path []string, va *extensions.VariantArray, mask []byte) error {
	metas, values, plain := plainVariant(va)
	var prev []byte // the metadata bytes meta was parsed from: rows of one source usually share them
	var meta variant.Metadata
	for i := range va.Len() {
		if va.Storage().IsNull(i) || (mask != nil && !bitutil.BitIsSet(mask, i)) {
			continue
		}
		err := func() (err error) {
			defer func() { // arrow-go's reader panics on some bytes: a refused row, never a crashed Write
				if r := recover(); r != nil {
					prev, err = nil, fmt.Errorf("the variant reader panicked: %v", r)
				}
			}()
			switch {
			case !plain:
				_, err = va.Value(i)
			case values.IsNull(i):
			default:
				m := metas.Value(i)
				if prev == nil || !bytes.Equal(m, prev) {
					if meta, err = variant.NewMetadata(m); err == nil {
						prev = m
					}
				}
				if err == nil {
					_, err = variant.NewWithMetadata(meta, values.Value(i))
				}
			}
			return err
		}()
		if err != nil {
			return rowErr(path, false, ErrTypeMismatch, "row %d is not a valid variant: %v", i, err)
		}
	}
	return nil
}

// plainVariant returns the metadata and value columns of an unshredded variant array whose columns are plain
// binary (ok false otherwise: the array's own reader decodes it).
func plainVariant(va *extensions.VariantArray) (metas, values arrow.TypedArray[[]byte], ok bool) {
	if va.IsShredded() {
		return nil, nil, false
	}
	st := va.Storage().(*array.Struct)
	stt := st.DataType().(*arrow.StructType)
	mi, okm := stt.FieldIdx("metadata")
	vi, okv := stt.FieldIdx("value")
	if !okm || !okv {
		return nil, nil, false
	}
	metas, okm = st.Field(mi).(arrow.TypedArray[[]byte])
	values, okv = st.Field(vi).(arrow.TypedArray[[]byte])
	return metas, values, okm && okv
}
