package commit

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// TestRunCodecEveryField fills every exported field of Run and Segment by reflection, sends the run through
// MarshalBinary and UnmarshalBinary, and compares field by field: a field added to Run or Segment and not
// encoded fails here (a run forwarded to a coordinator would silently lose it), and so does a field of a type
// the filler does not know, until a case is added for it.
func TestRunCodecEveryField(t *testing.T) {
	sc := ice.NewSchema(0, ice.NestedField{ID: 1, Name: "id", Type: ice.PrimitiveTypes.Int64, Required: true})
	run := &Run{formatVersion: 3, spec: *ice.UnpartitionedSpec, schema: sc}
	counter := int64(0)
	fill(t, reflect.ValueOf(run).Elem(), "Run", &counter)
	wire, err := run.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var got Run
	if err := got.UnmarshalBinary(wire); err != nil {
		t.Fatal(err)
	}
	same(t, reflect.ValueOf(run).Elem(), reflect.ValueOf(&got).Elem(), "Run")
}

var (
	dataFileType = reflect.TypeFor[ice.DataFile]()
	recordType   = reflect.TypeFor[arrow.RecordBatch]()
)

// fill sets every exported field of v to a value that is not zero.
func fill(t *testing.T, v reflect.Value, path string, n *int64) {
	t.Helper()
	*n++
	switch {
	case v.Type() == reflect.TypeFor[table.Identifier]():
		v.Set(reflect.ValueOf(table.Identifier{"ns", path}))
		return
	case v.Kind() == reflect.Slice && v.Type().Elem() == dataFileType:
		v.Set(reflect.ValueOf([]ice.DataFile{testFile(t, path, *n)}))
		return
	case v.Kind() == reflect.Slice && v.Type().Elem() == recordType:
		b := array.NewRecordBuilder(memory.NewGoAllocator(), arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil))
		defer b.Release()
		b.Field(0).(*array.Int64Builder).AppendValues([]int64{*n, *n + 1}, nil)
		v.Set(reflect.ValueOf([]arrow.RecordBatch{b.NewRecordBatch()}))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if f := v.Type().Field(i); f.IsExported() {
				fill(t, v.Field(i), path+"."+f.Name, n)
			}
		}
	case reflect.String:
		v.SetString("s-" + path)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(*n)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), path, n)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := 0; i < 2; i++ {
			fill(t, v.Index(i), path, n)
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for i := 0; i < 2; i++ {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(t, k, fmt.Sprintf("%s[%d]", path, i), n)
			fill(t, e, path, n)
			v.SetMapIndex(k, e)
		}
	default:
		t.Fatalf("%s: no test value for a %s: add a case to fill and to the codec", path, v.Type())
	}
}

// testFile is a file of the kind a field holds: deletion vectors for DV fields, equality deletes for
// DeleteFiles, data files otherwise.
func testFile(t *testing.T, path string, n int64) ice.DataFile {
	t.Helper()
	content, format := ice.EntryContentData, ice.ParquetFile
	switch {
	case strings.Contains(path, "DV"):
		content, format = ice.EntryContentPosDeletes, ice.PuffinFile
	case strings.Contains(path, "DeleteFiles"):
		content = ice.EntryContentEqDeletes
	}
	b, err := ice.NewDataFileBuilder(*ice.UnpartitionedSpec, content, "file:///t/"+path+".f", format, nil, nil, nil, n, 100*n)
	if err != nil {
		t.Fatal(err)
	}
	switch content {
	case ice.EntryContentPosDeletes:
		b.ReferencedDataFile("file:///t/data.parquet").ContentOffset(4).ContentSizeInBytes(40)
	case ice.EntryContentEqDeletes:
		b.EqualityFieldIDs([]int{1})
	}
	return b.Build()
}

// same compares what fill set with what came back.
func same(t *testing.T, want, got reflect.Value, path string) {
	t.Helper()
	switch {
	case want.Kind() == reflect.Slice && want.Type().Elem() == dataFileType:
		if want.Len() != got.Len() {
			t.Fatalf("%s: %d files came back, %d sent", path, got.Len(), want.Len())
		}
		for i := 0; i < want.Len(); i++ {
			w, g := want.Index(i).Interface().(ice.DataFile), got.Index(i).Interface().(ice.DataFile)
			if w.FilePath() != g.FilePath() || w.ContentType() != g.ContentType() || w.Count() != g.Count() ||
				w.FileSizeBytes() != g.FileSizeBytes() || !reflect.DeepEqual(w.EqualityFieldIDs(), g.EqualityFieldIDs()) ||
				!reflect.DeepEqual(w.ReferencedDataFile(), g.ReferencedDataFile()) ||
				!reflect.DeepEqual(w.ContentOffset(), g.ContentOffset()) ||
				!reflect.DeepEqual(w.ContentSizeInBytes(), g.ContentSizeInBytes()) {
				t.Fatalf("%s[%d]: file changed on the wire", path, i)
			}
		}
		return
	case want.Kind() == reflect.Slice && want.Type().Elem() == recordType:
		if want.Len() != got.Len() {
			t.Fatalf("%s: %d records came back, %d sent", path, got.Len(), want.Len())
		}
		for i := 0; i < want.Len(); i++ {
			w, g := want.Index(i).Interface().(arrow.RecordBatch), got.Index(i).Interface().(arrow.RecordBatch)
			if !array.RecordEqual(w, g) {
				t.Fatalf("%s[%d]: record changed on the wire", path, i)
			}
		}
		return
	}
	switch want.Kind() {
	case reflect.Struct:
		for i := 0; i < want.NumField(); i++ {
			if f := want.Type().Field(i); f.IsExported() {
				same(t, want.Field(i), got.Field(i), path+"."+f.Name)
			}
		}
	case reflect.Slice:
		if want.Len() != got.Len() {
			t.Fatalf("%s: %d elements came back, %d sent", path, got.Len(), want.Len())
		}
		for i := 0; i < want.Len(); i++ {
			same(t, want.Index(i), got.Index(i), path)
		}
	case reflect.Pointer:
		if got.IsNil() {
			t.Fatalf("%s: nil came back", path)
		}
		same(t, want.Elem(), got.Elem(), path)
	default:
		if !reflect.DeepEqual(want.Interface(), got.Interface()) {
			t.Fatalf("%s: %v came back, %v sent", path, got.Interface(), want.Interface())
		}
	}
}
