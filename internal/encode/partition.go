package encode

import (
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/avro/atype"
)

// PartitionLogicalTypes maps the partition fields of spec whose values need an Avro logical type in a manifest
// (dates, times, timestamps, decimals, UUIDs) to it, as iceberg-go's DataFileBuilder wants them.
func PartitionLogicalTypes(meta table.Metadata, spec *ice.PartitionSpec) map[int]string {
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
	return logical
}
