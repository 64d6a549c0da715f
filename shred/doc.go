// Package shred turns Go values into Arrow record batches: structs (through a
// plan built once per type), maps of any values and JSON lines. It also infers
// Arrow schemas from Go types and from sample data.
//
// # Struct mapping
//
// A struct field's column name is its `iceberg:"name"` tag, else its `json`
// tag name, else its Go name in snake_case (UserID -> user_id, HTTPCode ->
// http_code). `iceberg:"-"` or `json:"-"` skips a field; unexported fields are
// skipped; embedded structs are flattened as encoding/json does. The tag
// option `required` (`iceberg:"id,required"`) makes the inferred field
// non-nullable (Nullable=false in SchemaOf): that is how a required column is
// reported for table creation. The option `decimal(P,S)` types a
// decimal128.Num field, and `ns` (`iceberg:"ts,ns"`) a time.Time field
// whose inferred column is timestamp[ns, tz=UTC] (Iceberg timestamptz_ns)
// instead of microseconds.
//
// Go types map to Arrow types as follows: bool -> bool; int8/16/32/64 -> the
// same; uint8/16/32 -> int16/32/64; int, uint, uint64 -> int64 (uint64 values
// above MaxInt64 are an error); float32/64 -> float32/64; string -> utf8;
// []byte -> binary; [16]byte and uuid.UUID -> the arrow UUID extension type
// (the type iceberg-go uses for uuid columns); time.Time -> timestamp[us,
// tz=UTC] (timestamp[ns, tz=UTC] with the ns option); json.RawMessage,
// variant.Value (arrow-go's parquet/variant), any, map[string]any and []any
// -> variant (arrow-go's extensions.VariantType, Iceberg's variant, a format
// version 3 type; until this release json.RawMessage was binary and the
// others were errors); time.Duration -> int64 nanoseconds; decimal128.Num ->
// decimal128(P,S) from the tag; structs -> struct columns; slices -> list
// columns; maps with string or integer keys -> map columns. Pointers and the
// database/sql Null types (NullString, NullInt64, ..., sql.Null[T]) may hold
// null. Any other type (chan, func, a non-empty interface, complex) is an
// error at plan time naming the Go field and the column.
//
// When a target schema is given (the table's Arrow schema), values are
// written straight into it: columns match by name, Go values are converted
// where the conversion is lossless (int32 -> int64, float32 -> float64,
// string -> large_string, ...), and range checks run per value. time.Time
// goes into any timestamp unit or date32: a nanosecond column keeps every
// digit, a time outside what int64 nanoseconds hold (before 1677-09-21, after
// 2262-04-11) is an error, never a wrap-around; a microsecond column (the
// Iceberg timestamp and timestamptz types) truncates the nanoseconds toward
// the past, as its type says. Errors name the column through *FieldError.
//
// # Variant columns
//
// A field of any Go type writes into a variant column: json.RawMessage is
// JSON text (AppendVariantJSON), variant.Value is taken as it is, other values
// are converted as AppendVariant says. A nil interface, pointer, map or
// slice, an empty json.RawMessage and the zero variant.Value are a null row;
// the JSON text null and nil inside a value are the variant null. Maps and
// JSON lines write into variant columns as well (see JSONLines).
// AppendVariantJSON and AppendVariant append one value to an arrow-go
// VariantBuilder, for sources that build their own batches;
// AppendVariantJSONWithOptions chooses what a key given twice and a number
// without an exact variant value do (the Kafka sink and the Postgres source
// keep the last value and refuse such numbers).
package shred
