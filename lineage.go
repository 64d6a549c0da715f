package iceberg

import (
	"fmt"

	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/avro/atype"
)

// withFirstRowID returns a copy of a data file written by iceberg-go's WriteRecords with its first_row_id set.
//
// On format-version 3 tables iceberg-go's ReplaceFiles takes only data files with an explicit first_row_id. A
// copy-on-write rewrite writes every row's _row_id as a column (read with lineage, written preserving it), so
// the files it writes need no id from the table: each gets a disjoint slice of the id range of the file it
// replaces, which no other live file holds, and the explicit column wins on read.
func withFirstRowID(meta table.Metadata, df ice.DataFile, firstRowID int64) (ice.DataFile, error) {
	spec := meta.PartitionSpecByID(int(df.SpecID()))
	if spec == nil {
		return nil, fmt.Errorf("iceberg: data file %s: unknown partition spec %d", df.FilePath(), df.SpecID())
	}
	sc := meta.CurrentSchema()
	logical := map[int]string{}
	for _, f := range spec.Fields() {
		src, ok := sc.FindFieldByID(f.SourceID())
		if !ok {
			continue
		}
		switch f.Transform.ResultType(src.Type).(type) {
		case ice.DateType:
			logical[f.FieldID] = atype.Date
		case ice.TimeType:
			logical[f.FieldID] = atype.TimeMicros
		case ice.TimestampType, ice.TimestampTzType:
			logical[f.FieldID] = atype.TimestampMicros
		case ice.DecimalType:
			logical[f.FieldID] = atype.Decimal
		case ice.UUIDType:
			logical[f.FieldID] = atype.UUID
		}
	}
	b, err := ice.NewDataFileBuilder(*spec, df.ContentType(), df.FilePath(), df.FileFormat(), df.Partition(), logical, nil,
		df.Count(), df.FileSizeBytes())
	if err != nil {
		return nil, fmt.Errorf("iceberg: data file %s: %w", df.FilePath(), err)
	}
	b.ColumnSizes(df.ColumnSizes()).ValueCounts(df.ValueCounts()).NullValueCounts(df.NullValueCounts()).
		NaNValueCounts(df.NaNValueCounts()).LowerBoundValues(df.LowerBoundValues()).
		UpperBoundValues(df.UpperBoundValues()).SplitOffsets(df.SplitOffsets())
	if d := df.DistinctValueCounts(); len(d) > 0 {
		b.DistinctValueCounts(d)
	}
	if k := df.KeyMetadata(); len(k) > 0 {
		b.KeyMetadata(k)
	}
	if s := df.SortOrderID(); s != nil {
		b.SortOrderID(*s)
	}
	return b.FirstRowID(firstRowID).Build(), nil
}
