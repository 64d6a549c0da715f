package encode

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	ice "github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
)

// Shredding of chosen variant paths. iceberg-go's writer infers each file's shredded layout from its rows and
// offers no way to pass one (its ShredRecordVariants is internal), so a table whose paths are chosen has its data
// files written here: each variant column with chosen paths is shredded by arrow-go's variant builder
// (extensions.NewVariantBuilder over extensions.NewShreddedVariantType) into exactly those paths, a value of
// another type at a path going to the residual, and written with pqarrow; table.FileToDataFile then reads the
// file's statistics back, the spec's variant bounds on the shredded paths included.

// ShredPropertyPrefix is the table property prefix naming a variant column's chosen paths:
// write.parquet.variant-shredded-paths.<column> = "<path>:<type>,...", e.g. "a:long,user.name:string".
const ShredPropertyPrefix = "write.parquet.variant-shredded-paths."

// ShredPath is a chosen path of a variant column: the object field names from the root (Fields, $.a.b as
// ["a", "b"]) and the Iceberg type its values are stored as.
type ShredPath struct {
	Fields []string
	Type   ice.Type
}

// String is the path as JSON path ($.a.b).
func (p ShredPath) String() string { return "$." + strings.Join(p.Fields, ".") }

// ShredLayout is the chosen paths of each variant column, by column name (nil: none chosen).
type ShredLayout map[string][]ShredPath

// ParsePath parses a path written as $.a.b or a.b: object field names joined by dots (an array element cannot
// be chosen), none empty.
func ParsePath(s string) ([]string, error) {
	p := strings.TrimPrefix(strings.TrimSpace(s), "$")
	p = strings.TrimPrefix(p, ".")
	if p == "" {
		return nil, fmt.Errorf("path %q: no field", s)
	}
	fields := strings.Split(p, ".")
	for _, f := range fields {
		if f == "" || strings.ContainsAny(f, "[]*'\" ") {
			return nil, fmt.Errorf("path %q: want object field names joined by dots ($.a.b)", s)
		}
	}
	return fields, nil
}

// shredTypes are the Iceberg types a chosen path may have, by name, with the Arrow type of its typed_value
// column: the primitives arrow-go's shredded builder and iceberg-go's variant bounds both handle (decimals
// are left out: pqarrow cannot write a shredded decimal in the types the spec asks for).
var shredTypes = map[string]ice.Type{
	"boolean":     ice.PrimitiveTypes.Bool,
	"int":         ice.PrimitiveTypes.Int32,
	"long":        ice.PrimitiveTypes.Int64,
	"float":       ice.PrimitiveTypes.Float32,
	"double":      ice.PrimitiveTypes.Float64,
	"string":      ice.PrimitiveTypes.String,
	"binary":      ice.PrimitiveTypes.Binary,
	"date":        ice.PrimitiveTypes.Date,
	"time":        ice.PrimitiveTypes.Time,
	"timestamp":   ice.PrimitiveTypes.Timestamp,
	"timestamptz": ice.PrimitiveTypes.TimestampTz,
}

// ShredTypeNames is the type names a chosen path may have, sorted.
func ShredTypeNames() []string { return slices.Sorted(maps.Keys(shredTypes)) }

// arrowOf is the Arrow type of a chosen path's typed_value column, or false for a type that cannot be chosen.
func arrowOf(t ice.Type) (arrow.DataType, bool) {
	switch t {
	case ice.PrimitiveTypes.Bool:
		return arrow.FixedWidthTypes.Boolean, true
	case ice.PrimitiveTypes.Int32:
		return arrow.PrimitiveTypes.Int32, true
	case ice.PrimitiveTypes.Int64:
		return arrow.PrimitiveTypes.Int64, true
	case ice.PrimitiveTypes.Float32:
		return arrow.PrimitiveTypes.Float32, true
	case ice.PrimitiveTypes.Float64:
		return arrow.PrimitiveTypes.Float64, true
	case ice.PrimitiveTypes.String:
		return arrow.BinaryTypes.String, true
	case ice.PrimitiveTypes.Binary:
		return arrow.BinaryTypes.Binary, true
	case ice.PrimitiveTypes.Date:
		return arrow.FixedWidthTypes.Date32, true
	case ice.PrimitiveTypes.Time:
		return arrow.FixedWidthTypes.Time64us, true
	case ice.PrimitiveTypes.Timestamp:
		return &arrow.TimestampType{Unit: arrow.Microsecond}, true
	case ice.PrimitiveTypes.TimestampTz:
		return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, true
	}
	return nil, false
}

// ParseShredProperty parses a table property's value: "<path>:<type>" items separated by commas, e.g.
// "a:long, user.name:string" (types as ShredTypeNames lists them).
func ParseShredProperty(value string) ([]ShredPath, error) {
	var out []ShredPath
	for item := range strings.SplitSeq(value, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		path, typ, ok := strings.Cut(item, ":")
		if !ok {
			return nil, fmt.Errorf("item %q: want <path>:<type>", item)
		}
		fields, err := ParsePath(path)
		if err != nil {
			return nil, err
		}
		t, ok := shredTypes[strings.ToLower(strings.TrimSpace(typ))]
		if !ok {
			return nil, fmt.Errorf("path %s: type %q is not one of %s", path, strings.TrimSpace(typ),
				strings.Join(ShredTypeNames(), ", "))
		}
		out = append(out, ShredPath{Fields: fields, Type: t})
	}
	if len(out) == 0 {
		return nil, errors.New("no path")
	}
	return out, nil
}

// ShredLayoutOf reads the chosen paths of a table's properties (ShredPropertyPrefix), by column name; an
// unreadable value is an error naming the property.
func ShredLayoutOf(props ice.Properties) (ShredLayout, error) {
	var out ShredLayout
	for k, v := range props {
		col, ok := strings.CutPrefix(k, ShredPropertyPrefix)
		if !ok {
			continue
		}
		paths, err := ParseShredProperty(v)
		if err != nil {
			return nil, fmt.Errorf("table property %s: %w", k, err)
		}
		if out == nil {
			out = ShredLayout{}
		}
		out[col] = paths
	}
	return out, nil
}

// CheckColumn checks a column's chosen paths against the table schema: the column is a top-level variant
// column (iceberg-go reads bounds of those only), every path is a primitive the builder handles, and no path
// is another's prefix or repeated (a path cannot be both a value and an object).
func CheckColumn(schema *ice.Schema, column string, paths []ShredPath) error {
	f, ok := schema.FindFieldByName(column)
	if !ok {
		return errors.New("no such column")
	}
	if _, ok := f.Type.(ice.VariantType); !ok {
		return fmt.Errorf("column is %s, not variant", f.Type)
	}
	if top := schema.Fields(); !slices.ContainsFunc(top, func(t ice.NestedField) bool { return t.ID == f.ID }) {
		return errors.New("not a top-level column: only top-level variant columns are shredded")
	}
	if len(paths) == 0 {
		return errors.New("no path")
	}
	for i, p := range paths {
		if len(p.Fields) == 0 || slices.Contains(p.Fields, "") {
			return fmt.Errorf("path %s: an empty field name", p)
		}
		if _, ok := arrowOf(p.Type); !ok {
			return fmt.Errorf("path %s: type %v cannot be shredded (one of %s)", p, p.Type, strings.Join(ShredTypeNames(), ", "))
		}
		for _, q := range paths[:i] {
			n := min(len(p.Fields), len(q.Fields))
			if slices.Equal(p.Fields[:n], q.Fields[:n]) {
				if len(p.Fields) == len(q.Fields) {
					return fmt.Errorf("path %s: given twice", p)
				}
				return fmt.Errorf("paths %s and %s: one is inside the other (a path is a value or an object, not both)", q, p)
			}
		}
	}
	return nil
}

// typedValue is the Arrow type of a column's typed_value: an object (struct) of the chosen paths.
func typedValue(paths []ShredPath) arrow.DataType {
	type node struct {
		leaf     arrow.DataType
		names    []string
		children map[string]*node
	}
	root := &node{children: map[string]*node{}}
	for _, p := range paths {
		n := root
		for _, f := range p.Fields {
			c, ok := n.children[f]
			if !ok {
				c = &node{children: map[string]*node{}}
				n.children[f] = c
				n.names = append(n.names, f)
			}
			n = c
		}
		n.leaf, _ = arrowOf(p.Type)
	}
	var build func(n *node) arrow.DataType
	build = func(n *node) arrow.DataType {
		if n.leaf != nil {
			return n.leaf
		}
		fields := make([]arrow.Field, len(n.names))
		for i, name := range n.names {
			fields[i] = arrow.Field{Name: name, Type: build(n.children[name]), Nullable: true}
		}
		return arrow.StructOf(fields...)
	}
	return build(root)
}

// Schema is schema with each variant column of the layout swapped for its shredded type (field metadata, the
// field id, kept), or schema itself when none of its columns is in the layout.
func (l ShredLayout) Schema(schema *arrow.Schema) *arrow.Schema {
	fields := schema.Fields()
	changed := false
	for i, f := range fields {
		paths, ok := l[f.Name]
		if !ok {
			continue
		}
		if _, ok := f.Type.(*extensions.VariantType); !ok {
			continue
		}
		fields[i].Type = extensions.NewShreddedVariantType(typedValue(paths))
		changed = true
	}
	if !changed {
		return schema
	}
	md := schema.Metadata()
	return arrow.NewSchema(fields, &md)
}

// Shred returns rec (of the table's Arrow schema) with its variant columns shredded into shredded's layout
// (l.Schema of rec's schema): each value's chosen paths go to their typed columns when they have the chosen
// type, everything else to the residual; a SQL null stays null, the variant null stays a variant null.
func Shred(rec arrow.RecordBatch, shredded *arrow.Schema, mem memory.Allocator) (out arrow.RecordBatch, err error) {
	cols := make([]arrow.Array, rec.NumCols())
	var built []arrow.Array
	defer func() {
		for _, a := range built {
			a.Release()
		}
	}()
	for i := range int(rec.NumCols()) {
		vt, ok := shredded.Field(i).Type.(*extensions.VariantType)
		src, isVariant := rec.Column(i).(*extensions.VariantArray)
		if !ok || !isVariant || vt.TypedValue().Type == nil {
			cols[i] = rec.Column(i)
			continue
		}
		arr, err := shredColumn(src, vt, mem)
		if err != nil {
			return nil, fmt.Errorf("iceberg: shred variant column %s: %w", shredded.Field(i).Name, err)
		}
		built = append(built, arr)
		cols[i] = arr
	}
	return array.NewRecordBatch(shredded, cols, rec.NumRows()), nil
}

// shredColumn builds one shredded column; arrow-go's builder panics on input it cannot take, which becomes an
// error here.
func shredColumn(src *extensions.VariantArray, vt *extensions.VariantType, mem memory.Allocator) (arr arrow.Array, err error) {
	b := extensions.NewVariantBuilder(mem, vt)
	defer b.Release()
	defer func() {
		if r := recover(); r != nil {
			arr, err = nil, fmt.Errorf("%v", r)
		}
	}()
	b.Reserve(src.Len())
	storage := src.Storage()
	for i := range src.Len() {
		if storage.IsNull(i) {
			b.AppendNull()
			continue
		}
		v, err := src.Value(i)
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		b.Append(v)
	}
	return b.NewArray(), nil
}

// writeShredded writes recs (owned: each is released once written) as data files of an unpartitioned table
// in the encoder's layout (ShredWrite), named with the write UUID's mark. lineage is the schema of a write that
// keeps the v3 row-lineage columns of recs (nil: none).
func (e *Encoder[H]) writeShredded(ctx context.Context, tbl *table.Table, schema *arrow.Schema, recs []arrow.RecordBatch,
	lineage *ice.Schema) ([]ice.DataFile, error) {
	defer func() {
		for _, r := range recs {
			if r != nil {
				r.Release()
			}
		}
	}()
	var rows int64
	for _, r := range recs {
		rows += r.NumRows()
	}
	w := ShredWrite{Layout: e.Shred, Mem: e.Mem, TargetFileSize: e.fileSize(), RowGroupRows: e.RowGroupRows,
		Lineage: lineage, UUID: e.next()}
	if e.KeyNames != nil && !e.Bulk() {
		w.BloomKeys, w.BloomRows = e.KeyNames, min(rows, int64(e.RowGroupRows))
	}
	return w.Write(ctx, tbl, schema, func(yield func(arrow.RecordBatch, error) bool) {
		for i, r := range recs {
			recs[i] = nil
			if !yield(r, nil) {
				return
			}
		}
	})
}

// writeShreddedPartitions writes a partitioned table's batch (one record, not owned) in the encoder's layout: a
// ShredWrite per partition group (GroupPartitions; grouped false: a partition source it cannot read, refused),
// with the group's partition values, in the order of the groups.
func (e *Encoder[H]) writeShreddedPartitions(ctx context.Context, tbl *table.Table, schema *arrow.Schema, one arrow.RecordBatch,
	groups *PartitionGroups, grouped bool, lineage *ice.Schema, keep *PackedFiles) ([]ice.DataFile, *RowOrder, error) {
	if !grouped {
		return nil, nil, fmt.Errorf("iceberg: shredded variant paths: table %v: the partition source columns (%s) are of a type the "+
			"writer cannot group rows by", tbl.Identifier(), PartitionColumns(tbl.Spec(), tbl.Schema()))
	}
	e.lastParts.Store(int64(groups.Count()))
	e.WarnFanout(tbl, groups.Count(), one.NumRows())
	var order *RowOrder
	if mapsRows(tbl) {
		order = &RowOrder{}
	}
	var files []ice.DataFile
	for p := range groups.Count() {
		rows := groups.Rows(p)
		rec, err := TakeRecordRows(ctx, e.Mem, one, rows)
		if err != nil {
			return nil, nil, err
		}
		values, ok := PartitionValues(tbl.Spec(), tbl.Schema(), rec, 0)
		if !ok {
			rec.Release()
			return nil, nil, fmt.Errorf("iceberg: shredded variant paths: table %v: cannot read the partition values of %s",
				tbl.Identifier(), PartitionColumns(tbl.Spec(), tbl.Schema()))
		}
		w := ShredWrite{Layout: e.Shred, Mem: e.Mem, TargetFileSize: e.fileSize(), RowGroupRows: e.RowGroupRows,
			Lineage: lineage, UUID: e.next(), Partition: values}
		if e.KeyNames != nil && !e.Bulk() {
			w.BloomKeys, w.BloomRows = e.KeyNames, min(int64(len(rows)), int64(e.RowGroupRows))
		}
		taken := false
		out, err := w.Write(ctx, tbl, schema, func(yield func(arrow.RecordBatch, error) bool) {
			taken = true
			yield(rec, nil)
		})
		if !taken {
			rec.Release()
		}
		if err != nil {
			return nil, nil, err
		}
		if order != nil {
			order.add(rows)
		}
		files = append(files, out...)
	}
	files, err := e.keep(files, keep)
	return files, order, err
}

// ShredWrite is a write of a table's rows (of one partition on a partitioned table) as data files in a chosen
// layout (Layout): each record sorted by the table's sort order (sortKeys), shredded (Shred) and written by
// pqarrow with the table's Parquet settings (bulkWriterProps), files rolled at TargetFileSize, each file's
// statistics read back by table.FileToDataFile (the variant bounds on the chosen paths included). The appends'
// encoder, copy-on-write rewrites and compaction write through it.
type ShredWrite struct {
	Layout         ShredLayout
	Mem            memory.Allocator // nil: memory.DefaultAllocator
	TargetFileSize int64
	RowGroupRows   int
	// BloomKeys get a bloom filter sized for BloomRows distinct values (KeyBloomProperties; nil: none).
	BloomKeys []string
	BloomRows int64
	// Lineage is the schema of a write that keeps the records' v3 row-lineage columns (_row_id,
	// _last_updated_sequence_number), as table.WithPreserveRowLineage's; nil: none.
	Lineage *ice.Schema
	// UUID names the files, as iceberg-go's WithWriteUUID does (the zero UUID: a random one).
	UUID uuid.UUID
	// Partition is the partition values of every row written (field id to value, as DataFile.Partition gives
	// them), on a partitioned table: the rows are of one partition of the table's current spec. The files go
	// to the table's data location, not to a directory per partition (Iceberg does not ask for one).
	Partition map[int]any
}

// Write writes recs, which it releases as it takes them (as table.WriteRecords does), and returns the data
// files in the order of the rows. A failed write removes the files it wrote.
func (s ShredWrite) Write(ctx context.Context, tbl *table.Table, schema *arrow.Schema,
	recs iter.Seq2[arrow.RecordBatch, error]) (files []ice.DataFile, err error) {
	mem := s.Mem
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	id := s.UUID
	if id == (uuid.UUID{}) {
		id = uuid.New()
	}
	lp, err := tbl.LocationProvider()
	if err != nil {
		return nil, err
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, err
	}
	wfs, ok := fs.(iceio.WriteFileIO)
	if !ok {
		return nil, errors.New("iceberg: the table's file IO cannot write files")
	}
	shredded := s.Layout.Schema(schema)
	sortKeys, err := sortKeys(tbl, schema)
	if err != nil {
		return nil, err
	}
	arrProps := pqarrow.NewArrowWriterProperties(pqarrow.WithAllocator(mem), pqarrow.WithStoreSchema())
	var props *parquet.WriterProperties // picked on the first record (WriteBatchRows)
	statsSchema := tbl.Schema()
	if s.Lineage != nil {
		statsSchema = s.Lineage
	}
	var (
		fw      *pqarrow.FileWriter
		sink    *countingSink
		path    string
		written []string // files closed, removed if a later step fails
	)
	defer func() {
		if err == nil {
			return
		}
		if fw != nil {
			_ = fw.Close()
			written = append(written, path)
		}
		for _, p := range written {
			_ = fs.Remove(p)
		}
		files = nil
	}()
	closeFile := func() error {
		cerr := fw.Close() // closes the sink: the upload completes
		fw = nil
		written = append(written, path)
		if cerr != nil {
			return fmt.Errorf("iceberg: close data file %s: %w", path, cerr)
		}
		// FileToDataFile infers partition values from the file's bounds, which a bucket transform cannot: it
		// reads the statistics as unpartitioned, and the file is given its spec and values after.
		spec := tbl.Spec()
		df, err := table.FileToDataFile(ctx, fs, path, statsSchema, *ice.UnpartitionedSpec, 0, tbl.Properties())
		if err == nil && !spec.IsUnpartitioned() {
			df, err = withPartition(tbl.Metadata(), &spec, df, s.Partition)
		}
		if err != nil {
			return fmt.Errorf("iceberg: read back data file %s: %w", path, err)
		}
		files = append(files, df)
		return nil
	}
	for r, rerr := range recs {
		if rerr != nil {
			return nil, rerr
		}
		if r.NumRows() == 0 {
			r.Release()
			continue
		}
		if props == nil {
			var blooms []parquet.WriterProperty
			if s.BloomKeys != nil {
				blooms = keyBloomProps(tbl.Properties(), s.BloomKeys, s.BloomRows)
			}
			props, err = bulkWriterProps(tbl.Properties(), s.RowGroupRows,
				WriteBatchRows(tbl.Properties(), []arrow.RecordBatch{r}), shredded, arrProps, blooms...)
			if err != nil {
				r.Release()
				return nil, err
			}
		}
		if fw == nil {
			// iceberg-go's shape ({partition}-{task}-{write UUID}-{count}): the UUID carries the writer's mark.
			path = lp.NewDataLocation(fmt.Sprintf("00000-0-%s-%05d.parquet", id, len(written)+1))
			w, err := wfs.Create(path)
			if err != nil {
				r.Release()
				return nil, fmt.Errorf("iceberg: create data file %s: %w", path, err)
			}
			sink = &countingSink{w: w}
			if fw, err = pqarrow.NewFileWriter(shredded, sink, props, arrProps); err != nil {
				r.Release()
				_ = w.Close()
				return nil, fmt.Errorf("iceberg: open data file %s: %w", path, err)
			}
		}
		if len(sortKeys) > 0 {
			sorted, err := compute.SortRecordBatch(compute.WithAllocator(ctx, mem), r, sortKeys)
			r.Release()
			if err != nil {
				return nil, fmt.Errorf("iceberg: sort rows by the table's sort order: %w", err)
			}
			r = sorted
		}
		sr, err := Shred(r, shredded, mem)
		r.Release()
		if err != nil {
			return nil, err
		}
		err = fw.Write(sr) // a row group or more (the row-group limit), flushed as written
		sr.Release()
		if err != nil {
			return nil, fmt.Errorf("iceberg: write data file %s: %w", path, err)
		}
		if sink.n >= s.TargetFileSize { // rolls at the target size, as iceberg-go's writer does
			if err := closeFile(); err != nil {
				return nil, err
			}
		}
	}
	if fw != nil {
		if err := closeFile(); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// CheckPartitionSources reports the first partition source column of spec whose values the chosen-layout writer
// cannot read (PartitionValues: a top-level column of a primitive type arrowLiteral reads), with why ("": none).
func CheckPartitionSources(spec ice.PartitionSpec, sc *ice.Schema) (column, why string) {
	top := map[int]bool{}
	for _, f := range sc.Fields() {
		top[f.ID] = true
	}
	for _, f := range spec.Fields() {
		name, _ := sc.FindColumnName(f.SourceID())
		src, ok := sc.FindFieldByID(f.SourceID())
		if !ok || !top[f.SourceID()] {
			return name, "a partition source that is not a top-level column"
		}
		switch src.Type.(type) {
		case ice.Int32Type, ice.Int64Type, ice.Float32Type, ice.Float64Type, ice.BooleanType, ice.StringType,
			ice.BinaryType, ice.DateType, ice.TimestampType, ice.TimestampTzType, ice.TimestampNsType, ice.TimestampTzNsType:
		default:
			return name, fmt.Sprintf("a partition source of type %s", src.Type)
		}
	}
	return "", ""
}

// PartitionOf is the partition values a rewrite of df (copy-on-write, compaction) writes its rows with: df's,
// which must be of tbl's current spec (a file of an earlier spec would have its rows re-partitioned, which a
// chosen-layout rewrite does not do yet).
func PartitionOf(tbl *table.Table, df ice.DataFile) (map[int]any, error) {
	if spec := tbl.Spec(); !spec.IsUnpartitioned() && int(df.SpecID()) != spec.ID() {
		return nil, fmt.Errorf("iceberg: shredded variant paths: data file %s is of partition spec %d, not the table's %d: "+
			"a rewrite in the chosen layout does not re-partition rows yet", df.FilePath(), df.SpecID(), spec.ID())
	}
	return df.Partition(), nil
}

// withPartition is df with the partition spec and values given (its statistics, size and counts kept).
func withPartition(meta table.Metadata, spec *ice.PartitionSpec, df ice.DataFile, values map[int]any) (ice.DataFile, error) {
	b, err := ice.NewDataFileBuilder(*spec, df.ContentType(), df.FilePath(), df.FileFormat(), values,
		PartitionLogicalTypes(meta, spec), nil, df.Count(), df.FileSizeBytes())
	if err != nil {
		return nil, err
	}
	b.ColumnSizes(df.ColumnSizes()).ValueCounts(df.ValueCounts()).NullValueCounts(df.NullValueCounts()).
		NaNValueCounts(df.NaNValueCounts()).LowerBoundValues(df.LowerBoundValues()).
		UpperBoundValues(df.UpperBoundValues()).SplitOffsets(df.SplitOffsets())
	if s := df.SortOrderID(); s != nil {
		b.SortOrderID(*s)
	}
	return b.Build(), nil
}

// PartitionValues is the partition values of row r of rec (of the table's Arrow schema) under spec, as
// iceberg-go's writer computes them (the source value's literal, transformed); false for a source column it
// cannot read.
func PartitionValues(spec ice.PartitionSpec, sc *ice.Schema, rec arrow.RecordBatch, r int) (map[int]any, bool) {
	out := map[int]any{}
	for _, f := range spec.Fields() {
		name, ok := sc.FindColumnName(f.SourceID())
		if !ok {
			return nil, false
		}
		idx := rec.Schema().FieldIndices(name)
		if len(idx) != 1 {
			return nil, false
		}
		lit, ok, null := arrowLiteral(rec.Column(idx[0]), r)
		if !ok {
			return nil, false
		}
		if null {
			out[f.FieldID] = nil
			continue
		}
		if v := f.Transform.Apply(ice.Optional[ice.Literal]{Valid: true, Val: lit}); v.Valid {
			out[f.FieldID] = v.Val.Any()
		} else {
			out[f.FieldID] = nil
		}
	}
	return out, true
}

// sortKeys are the sort keys of tbl's sort order over the columns of schema (nil: unsorted), as iceberg-go's
// writer sorts each record it writes (table/sort_keys.go resolveSortKeys: by the source column, whatever the
// transform, ascending with nulls last unless the field says otherwise).
func sortKeys(tbl *table.Table, schema *arrow.Schema) ([]compute.SortKey, error) {
	order := tbl.SortOrder()
	if order.IsUnsorted() {
		return nil, nil
	}
	var keys []compute.SortKey
	for _, f := range order.Fields() {
		name, ok := tbl.Schema().FindColumnName(f.SourceID())
		idx := schema.FieldIndices(name)
		if !ok || len(idx) != 1 {
			return nil, fmt.Errorf("iceberg: sort order %d: source id %d is not a top-level column", order.OrderID(), f.SourceID())
		}
		k := compute.SortKey{ColumnIndex: idx[0], Order: compute.SortOrderAscending, NullPlacement: compute.SortNullsAtEnd}
		if f.Direction == table.SortDESC {
			k.Order = compute.SortOrderDescending
		}
		if f.NullOrder == table.NullsFirst {
			k.NullPlacement = compute.SortNullsAtStart
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// keyBloomProps are the Parquet properties of a bloom filter on each key column sized for rows distinct values,
// as KeyBloomProperties asks iceberg-go's writer for (a column the table's properties turn off gets none).
func keyBloomProps(tprops ice.Properties, keys []string, rows int64) []parquet.WriterProperty {
	set := KeyBloomProperties(tprops, keys, rows)
	var opts []parquet.WriterProperty
	for _, k := range keys {
		key := table.ParquetBloomFilterColumnEnabledKeyPrefix + "." + k
		v, ok := set[key]
		if !ok {
			v = tprops[key]
		}
		if v == "true" {
			opts = append(opts, parquet.WithBloomFilterEnabledFor(k, true), parquet.WithBloomFilterNDVFor(k, rows),
				parquet.WithBloomFilterFPPFor(k, BloomFPP))
		}
	}
	return opts
}
