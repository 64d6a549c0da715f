package shred

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// BigIntType is the type inferred for integers beyond the int64 range.
var BigIntType = &arrow.Decimal128Type{Precision: 38, Scale: 0}

type ikind uint8

const (
	iNone ikind = iota
	iBool
	iNum
	iString
	iTime
	iBinary
	iStruct
	iList
)

var ikindNames = [...]string{"null", "bool", "number", "string", "timestamp", "binary", "object", "array"}

// inode accumulates what the rows say about one column.
type inode struct {
	kind      ikind
	sawInt    bool
	sawBig    bool
	sawFloat  bool
	maxAbsInt uint64
	names     []string
	children  map[string]*inode
	elem      *inode
}

// InferSchema infers an Arrow schema from rows without losing precision:
// integers are int64 (never float64), integers beyond int64 are
// decimal128(38,0), fractional numbers are float64, objects are structs (the
// union of their keys), arrays are lists of the unified element type, and
// columns that are only null are strings. An int64 column that also holds
// fractions becomes float64 only when every integer is exact in float64
// (|v| <= 2^53); otherwise, and for any other conflict, the error names the
// column. json.Number values (json.Decoder.UseNumber) are read exactly. All
// fields are nullable; columns are in order of first appearance (keys that
// first appear in the same row are sorted by name, as a Go map has no order).
func InferSchema(rows []map[string]any) (*arrow.Schema, error) {
	root := &inode{kind: iStruct, children: map[string]*inode{}}
	for i, r := range rows {
		if err := root.addObject(r, "", i); err != nil {
			return nil, err
		}
	}
	fields, err := root.structFields("")
	if err != nil {
		return nil, err
	}
	return arrow.NewSchema(fields, nil), nil
}

func (n *inode) addObject(m map[string]any, prefix string, row int) error {
	var fresh []string
	for k := range m {
		if _, ok := n.children[k]; !ok {
			fresh = append(fresh, k)
		}
	}
	sort.Strings(fresh) // a Go map has no order: keys new in the same row are sorted
	for _, k := range fresh {
		n.children[k] = &inode{}
		n.names = append(n.names, k)
	}
	for k, v := range m {
		if err := n.children[k].add(v, prefix+k, row); err != nil {
			return err
		}
	}
	return nil
}

func (n *inode) setKind(k ikind, col string, row int) error {
	if n.kind == iNone {
		n.kind = k
		if k == iStruct {
			n.children = map[string]*inode{}
		}
		return nil
	}
	if n.kind != k {
		return rowErr(col, row, fmt.Errorf("%s and %s values in one column: %w", ikindNames[n.kind], ikindNames[k], ErrTypeMismatch))
	}
	return nil
}

func (n *inode) addInt(abs uint64, col string, row int) error {
	if err := n.setKind(iNum, col, row); err != nil {
		return err
	}
	n.sawInt = true
	n.maxAbsInt = max(n.maxAbsInt, abs)
	return n.numCheck(col, row)
}

func (n *inode) numCheck(col string, row int) error {
	if n.sawFloat && (n.sawBig || n.maxAbsInt > 1<<53) {
		return rowErr(col, row, fmt.Errorf("integers beyond 2^53 and fractional numbers in one column would lose precision as float64: %w", ErrTypeMismatch))
	}
	return nil
}

func absI64(v int64) uint64 {
	if v < 0 {
		return uint64(-(v + 1)) + 1
	}
	return uint64(v)
}

func (n *inode) add(v any, col string, row int) error {
	switch x := v.(type) {
	case nil:
		return nil
	case bool:
		return n.setKind(iBool, col, row)
	case string:
		return n.setKind(iString, col, row)
	case json.Number:
		s := string(x)
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n.addInt(absI64(i), col, row)
		}
		if isIntLiteral(s) {
			if _, err := decimal128.FromString(s, 38, 0); err != nil {
				return rowErr(col, row, fmt.Errorf("integer %s does not fit decimal(38,0): %w", s, ErrOutOfRange))
			}
			if err := n.setKind(iNum, col, row); err != nil {
				return err
			}
			n.sawBig = true
			return n.numCheck(col, row)
		}
		if _, err := strconv.ParseFloat(s, 64); err != nil {
			return rowErr(col, row, fmt.Errorf("bad number %q: %w", s, ErrTypeMismatch))
		}
		if err := n.setKind(iNum, col, row); err != nil {
			return err
		}
		n.sawFloat = true
		return n.numCheck(col, row)
	case float64, float32:
		if err := n.setKind(iNum, col, row); err != nil {
			return err
		}
		n.sawFloat = true
		return n.numCheck(col, row)
	case time.Time:
		return n.setKind(iTime, col, row)
	case []byte:
		return n.setKind(iBinary, col, row)
	case map[string]any:
		if err := n.setKind(iStruct, col, row); err != nil {
			return err
		}
		return n.addObject(x, col+".", row)
	case []any:
		if err := n.setKind(iList, col, row); err != nil {
			return err
		}
		if n.elem == nil {
			n.elem = &inode{}
		}
		for _, e := range x {
			if err := n.elem.add(e, col, row); err != nil {
				return err
			}
		}
		return nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return n.addInt(absI64(rv.Int()), col, row)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		u := rv.Uint()
		if u > math.MaxInt64 {
			if err := n.setKind(iNum, col, row); err != nil {
				return err
			}
			n.sawBig = true
			return n.numCheck(col, row)
		}
		return n.addInt(u, col, row)
	}
	return rowErr(col, row, fmt.Errorf("Go type %T: %w", v, ErrUnsupportedType))
}

func isIntLiteral(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func (n *inode) structFields(prefix string) ([]arrow.Field, error) {
	fields := make([]arrow.Field, 0, len(n.names))
	for _, name := range n.names {
		dt, err := n.children[name].arrowType(prefix + name)
		if err != nil {
			return nil, err
		}
		fields = append(fields, arrow.Field{Name: name, Type: dt, Nullable: true})
	}
	return fields, nil
}

func (n *inode) arrowType(col string) (arrow.DataType, error) {
	switch n.kind {
	case iBool:
		return arrow.FixedWidthTypes.Boolean, nil
	case iNum:
		switch {
		case n.sawFloat:
			return arrow.PrimitiveTypes.Float64, nil
		case n.sawBig:
			return BigIntType, nil
		default:
			return arrow.PrimitiveTypes.Int64, nil
		}
	case iTime:
		return TimestampType, nil
	case iBinary:
		return arrow.BinaryTypes.Binary, nil
	case iStruct:
		fs, err := n.structFields(col + ".")
		if err != nil {
			return nil, err
		}
		if len(fs) == 0 {
			return arrow.StructOf(), nil
		}
		return arrow.StructOf(fs...), nil
	case iList:
		et := arrow.DataType(arrow.BinaryTypes.String)
		if n.elem != nil {
			var err error
			if et, err = n.elem.arrowType(col); err != nil {
				return nil, err
			}
		}
		return arrow.ListOfField(arrow.Field{Name: "element", Type: et, Nullable: true}), nil
	}
	return arrow.BinaryTypes.String, nil
}
