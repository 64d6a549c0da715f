package kafka

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/twmb/franz-go/pkg/kgo"
)

// headersType reports whether a column can hold records' headers: map<string, binary|string>, or
// list<struct<key: string, value: binary|string>>.
func headersType(t arrow.DataType) bool {
	isValue := func(t arrow.DataType) bool { return t.ID() == arrow.BINARY || t.ID() == arrow.STRING }
	switch t := t.(type) {
	case *arrow.MapType:
		return t.KeyType().ID() == arrow.STRING && isValue(t.ItemType())
	case *arrow.ListType:
		st, ok := t.Elem().(*arrow.StructType)
		if !ok || st.NumFields() != 2 {
			return false
		}
		k, v := st.Field(0), st.Field(1)
		return k.Name == "key" && k.Type.ID() == arrow.STRING && v.Name == "value" && isValue(v.Type)
	}
	return false
}

// appendHeaders appends each record's headers to b, a builder of a type headersType accepts. A map keeps a key's
// last value (Iceberg map keys are unique; Kafka allows a key twice), a list every header.
func appendHeaders(b array.Builder, recs []*kgo.Record) {
	switch b := b.(type) {
	case *array.MapBuilder:
		kb, vb := b.KeyBuilder().(*array.StringBuilder), b.ItemBuilder()
		for _, r := range recs {
			b.Append(true)
			last := map[string]int{}
			for i, h := range r.Headers {
				last[h.Key] = i
			}
			for i, h := range r.Headers {
				if last[h.Key] != i {
					continue
				}
				kb.Append(h.Key)
				appendHeaderValue(vb, h.Value)
			}
		}
	case *array.ListBuilder:
		sb := b.ValueBuilder().(*array.StructBuilder)
		kb, vb := sb.FieldBuilder(0).(*array.StringBuilder), sb.FieldBuilder(1)
		for _, r := range recs {
			b.Append(true)
			for _, h := range r.Headers {
				sb.Append(true)
				kb.Append(h.Key)
				appendHeaderValue(vb, h.Value)
			}
		}
	}
}

func appendHeaderValue(b array.Builder, v []byte) {
	switch b := b.(type) {
	case *array.BinaryBuilder:
		if v == nil {
			b.AppendNull()
		} else {
			b.Append(v)
		}
	case *array.StringBuilder:
		if v == nil {
			b.AppendNull()
		} else {
			b.Append(string(v))
		}
	}
}
