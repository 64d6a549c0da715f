package kafka

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/bufbuild/protocompile"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// Protobuf decodes values written by a schema-registry Protobuf serializer (Confluent wire format: a zero byte,
// the writer schema's ID, the message indexes, the Protobuf binary message). Each registered .proto file is
// fetched from cl once, by ID, with the files it imports (the schema's references; the well-known types are
// built in), compiled, and the message the indexes name is decoded with dynamicpb. Mapping to Arrow: a message
// is a struct (nullable), a repeated field a list, a map field a map with string keys (integer and bool keys
// are written in decimal or as "true"/"false"), an enum its value's name as a string, uint32 a long, uint64 a
// long (values above 2^63-1 are bad values), google.protobuf.Timestamp a timestamp in microseconds with zone
// UTC, or in nanoseconds, without loss, when the table's column is one (timestamptz_ns or timestamp_ns). A field with presence (proto2, proto3 optional, a message) is nullable; a proto3 scalar without it is
// required and reads its default when unset. The message's top-level fields are the batch's columns, matched to
// the table's by name as for Avro.
//
// Bad values and registry failures are told apart as Avro's are.
func Protobuf(cl *sr.Client) Decoder { return newRegistryDecoder(cl, protoFormat{}) }

type protoFormat struct{}

func (protoFormat) name() string { return "Protobuf" }

// maxMessageDepth bounds the message indexes of a value and the nesting of a mapped message (a recursive
// message has no Arrow type).
const maxMessageDepth = 32

func (protoFormat) split(payload []byte) (string, []byte, error) {
	var h sr.ConfluentHeader
	idx, rest, err := h.DecodeIndex(payload, maxMessageDepth)
	if err != nil {
		return "", nil, fmt.Errorf("message indexes: %w", err)
	}
	return indexKey(idx), rest, nil
}

// indexKey is the message indexes as a selector ("0.2"); "" and "0" both name the file's first message.
func indexKey(idx []int) string {
	parts := make([]string, len(idx))
	for i, x := range idx {
		parts[i] = strconv.Itoa(x)
	}
	return strings.Join(parts, ".")
}

func (protoFormat) compile(ctx context.Context, cl *sr.Client, s sr.Schema, sel string) (*writerSchema, error) {
	if s.Type != sr.TypeProtobuf {
		return nil, fmt.Errorf("schema type is %s, not Protobuf", s.Type)
	}
	const main = "registry/schema.proto" // a name no import uses
	files := map[string]string{main: s.Schema}
	if err := fetchProtoImports(ctx, cl, s.References, files); err != nil {
		return nil, err
	}
	c := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: func(path string) (io.ReadCloser, error) {
			src, ok := files[path]
			if !ok {
				return nil, fmt.Errorf("import %q is not among the schema's references", path)
			}
			return io.NopCloser(strings.NewReader(src)), nil
		},
	})}
	compiled, err := c.Compile(ctx, main)
	if err != nil {
		return nil, err
	}
	md, err := selectMessage(compiled[0].Messages(), sel)
	if err != nil {
		return nil, err
	}
	typ, err := protoMessageType(md, 0)
	if err != nil {
		return nil, err
	}
	return newWriterSchema(typ.Fields(), func(payload []byte) (map[string]any, error) {
		msg := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(payload, msg); err != nil {
			return nil, err
		}
		return protoRow(msg)
	}), nil
}

// fetchProtoImports adds the source of every file the schema imports, by import path, to files.
func fetchProtoImports(ctx context.Context, cl *sr.Client, refs []sr.SchemaReference, files map[string]string) error {
	for _, ref := range refs {
		if _, ok := files[ref.Name]; ok {
			continue
		}
		s, err := cl.SchemaByVersion(ctx, ref.Subject, ref.Version)
		if err != nil {
			return fmt.Errorf("import %q (subject %q version %d): %w", ref.Name, ref.Subject, ref.Version, err)
		}
		files[ref.Name] = s.Schema.Schema
		if err := fetchProtoImports(ctx, cl, s.References, files); err != nil {
			return err
		}
	}
	return nil
}

// selectMessage follows the message indexes: the first into the file's messages, the next ones into nested
// messages.
func selectMessage(msgs protoreflect.MessageDescriptors, sel string) (protoreflect.MessageDescriptor, error) {
	if sel == "" {
		sel = "0"
	}
	var md protoreflect.MessageDescriptor
	for _, part := range strings.Split(sel, ".") {
		i, _ := strconv.Atoi(part)
		if i < 0 || i >= msgs.Len() {
			return nil, fmt.Errorf("message index %s: no such message", sel)
		}
		md = msgs.Get(i)
		msgs = md.Messages()
	}
	return md, nil
}

const timestampName = "google.protobuf.Timestamp"

func protoMessageType(md protoreflect.MessageDescriptor, depth int) (*arrow.StructType, error) {
	if depth > maxMessageDepth {
		return nil, fmt.Errorf("message %s: nested deeper than %d (a recursive message?)", md.FullName(), maxMessageDepth)
	}
	fds := md.Fields()
	fields := make([]arrow.Field, fds.Len())
	for i := range fds.Len() {
		fd := fds.Get(i)
		typ, err := protoFieldType(fd, depth)
		if err != nil {
			return nil, err
		}
		fields[i] = arrow.Field{Name: string(fd.Name()), Type: typ, Nullable: fd.HasPresence() && !fd.IsList() && !fd.IsMap()}
	}
	return arrow.StructOf(fields...), nil
}

func protoFieldType(fd protoreflect.FieldDescriptor, depth int) (arrow.DataType, error) {
	if fd.IsMap() {
		val, err := protoKindType(fd.MapValue(), depth)
		if err != nil {
			return nil, err
		}
		mt := arrow.MapOf(arrow.BinaryTypes.String, val)
		mt.SetItemNullable(fd.MapValue().Kind() == protoreflect.MessageKind)
		return mt, nil
	}
	typ, err := protoKindType(fd, depth)
	if err != nil {
		return nil, err
	}
	if fd.IsList() {
		return arrow.ListOfField(arrow.Field{Name: "element", Type: typ, Nullable: false}), nil
	}
	return typ, nil
}

func protoKindType(fd protoreflect.FieldDescriptor, depth int) (arrow.DataType, error) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return arrow.FixedWidthTypes.Boolean, nil
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return arrow.PrimitiveTypes.Int32, nil
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return arrow.PrimitiveTypes.Int64, nil
	case protoreflect.FloatKind:
		return arrow.PrimitiveTypes.Float32, nil
	case protoreflect.DoubleKind:
		return arrow.PrimitiveTypes.Float64, nil
	case protoreflect.StringKind, protoreflect.EnumKind:
		return arrow.BinaryTypes.String, nil
	case protoreflect.BytesKind:
		return arrow.BinaryTypes.Binary, nil
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if fd.Message().FullName() == timestampName {
			return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, nil
		}
		st, err := protoMessageType(fd.Message(), depth+1)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", fd.Name(), err)
		}
		return st, nil
	}
	return nil, fmt.Errorf("field %q: kind %s has no column type", fd.Name(), fd.Kind())
}

// protoRow is a message's fields as a row for shred.Maps: an unset field with presence is null.
func protoRow(msg protoreflect.Message) (map[string]any, error) {
	fds := msg.Descriptor().Fields()
	row := make(map[string]any, fds.Len())
	for i := range fds.Len() {
		fd := fds.Get(i)
		if fd.HasPresence() && !msg.Has(fd) {
			row[string(fd.Name())] = nil
			continue
		}
		v, err := protoValue(fd, msg.Get(fd))
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", fd.Name(), err)
		}
		row[string(fd.Name())] = v
	}
	return row, nil
}

func protoValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) (any, error) {
	switch {
	case fd.IsMap():
		out := map[string]any{}
		var err error
		v.Map().Range(func(k protoreflect.MapKey, x protoreflect.Value) bool {
			var e any
			if e, err = protoScalar(fd.MapValue(), x); err == nil {
				out[k.String()] = e
			}
			return err == nil
		})
		return out, err
	case fd.IsList():
		l := v.List()
		out := make([]any, l.Len())
		for i := range l.Len() {
			e, err := protoScalar(fd, l.Get(i))
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	}
	return protoScalar(fd, v)
}

func protoScalar(fd protoreflect.FieldDescriptor, v protoreflect.Value) (any, error) {
	switch fd.Kind() {
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name()), nil
		}
		return strconv.Itoa(int(v.Enum())), nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return int64(v.Uint()), nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if v.Uint() > 1<<63-1 {
			return nil, fmt.Errorf("uint64 %d does not fit a long", v.Uint())
		}
		return int64(v.Uint()), nil
	case protoreflect.MessageKind, protoreflect.GroupKind:
		m := v.Message()
		if fd.Message().FullName() == timestampName {
			f := m.Descriptor().Fields()
			return time.Unix(m.Get(f.ByName("seconds")).Int(), m.Get(f.ByName("nanos")).Int()).UTC(), nil
		}
		return protoRow(m)
	}
	return v.Interface(), nil
}
