package shred

import (
	"database/sql"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// goField is one column found in a struct type.
type goField struct {
	name     string       // column name
	goName   string       // Go field name, for messages
	index    []int        // reflect index path
	offs     []uintptr    // offsets; a pointer is dereferenced between two of them
	typ      reflect.Type // field type
	required bool
	decimal  bool // decimal(P,S) option given
	prec     int32
	scale    int32
	nanos    bool // ns option: time.Time infers timestamp[ns]
	tagged   bool
}

// structPlan is the cached, allocator-independent description of a struct type.
type structPlan struct {
	typ    reflect.Type
	fields []goField
	err    error
}

var planCache sync.Map // reflect.Type -> *structPlan

func planFor(t reflect.Type) (*structPlan, error) {
	if p, ok := planCache.Load(t); ok {
		sp := p.(*structPlan)
		return sp, sp.err
	}
	sp := &structPlan{typ: t}
	if t.Kind() != reflect.Struct {
		sp.err = fmt.Errorf("shred: %v is not a struct type: %w", t, ErrUnsupportedType)
	} else {
		sp.fields, sp.err = typeFields(t)
	}
	p, _ := planCache.LoadOrStore(t, sp)
	sp = p.(*structPlan)
	return sp, sp.err
}

var (
	timeType    = reflect.TypeFor[time.Time]()
	decimalType = reflect.TypeFor[decimal128.Num]()
	sqlPkgPath  = reflect.TypeFor[sql.NullString]().PkgPath()
)

// isLeafStruct reports struct types that map to one scalar column.
func isLeafStruct(t reflect.Type) bool {
	if t == timeType || t == decimalType || t == variantValueType {
		return true
	}
	_, _, ok := sqlNullParts(t)
	return ok
}

// holdsTime reports whether t is time.Time, possibly behind pointers,
// sql.Null types, slices, arrays and map values.
func holdsTime(t reflect.Type) bool {
	for {
		if v, _, ok := sqlNullParts(t); ok {
			t = v.Type
			continue
		}
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			t = t.Elem()
			continue
		}
		return t == timeType
	}
}

// sqlNullParts recognizes database/sql's NullX types and sql.Null[T]: a value
// field first and a Valid bool last.
func sqlNullParts(t reflect.Type) (val reflect.StructField, valid reflect.StructField, ok bool) {
	if t.Kind() != reflect.Struct || t.PkgPath() != sqlPkgPath || !strings.HasPrefix(t.Name(), "Null") || t.NumField() != 2 {
		return val, valid, false
	}
	val, valid = t.Field(0), t.Field(1)
	if valid.Name != "Valid" || valid.Type.Kind() != reflect.Bool {
		return val, valid, false
	}
	return val, valid, true
}

// tagInfo is a parsed field tag.
type tagInfo struct {
	name     string
	skip     bool
	required bool
	decimal  bool
	prec     int32
	scale    int32
	nanos    bool
}

// splitTag splits a tag on commas outside parentheses.
func splitTag(tag string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(tag); i++ {
		switch tag[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, tag[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, tag[start:])
}

func parseTags(sf reflect.StructField) (tagInfo, error) {
	var ti tagInfo
	ice, hasIce := sf.Tag.Lookup("iceberg")
	if hasIce {
		if ice == "-" {
			ti.skip = true
			return ti, nil
		}
		parts := splitTag(ice)
		ti.name = strings.TrimSpace(parts[0])
		for _, opt := range parts[1:] {
			opt = strings.TrimSpace(opt)
			switch {
			case opt == "required":
				ti.required = true
			case opt == "optional", opt == "":
			case opt == "ns":
				ti.nanos = true
			case strings.HasPrefix(opt, "decimal(") && strings.HasSuffix(opt, ")"):
				ps := strings.Split(opt[len("decimal("):len(opt)-1], ",")
				if len(ps) != 2 {
					return ti, fmt.Errorf("bad tag option %q: want decimal(P,S)", opt)
				}
				p, err1 := strconv.Atoi(strings.TrimSpace(ps[0]))
				s, err2 := strconv.Atoi(strings.TrimSpace(ps[1]))
				if err1 != nil || err2 != nil || p < 1 || p > 38 || s < 0 || s > p {
					return ti, fmt.Errorf("bad tag option %q: want decimal(P,S) with 1 <= P <= 38, 0 <= S <= P", opt)
				}
				ti.decimal, ti.prec, ti.scale = true, int32(p), int32(s)
			default:
				return ti, fmt.Errorf("unknown tag option %q", opt)
			}
		}
	}
	if ti.name == "" {
		js, hasJSON := sf.Tag.Lookup("json")
		if hasJSON {
			if js == "-" && !hasIce {
				ti.skip = true
				return ti, nil
			}
			if n, _, _ := strings.Cut(js, ","); n != "-" {
				ti.name = n
			}
		}
	}
	return ti, nil
}

// SnakeCase converts a Go identifier to the snake_case column name used when a
// field has no tag: UserID -> user_id, HTTPCode -> http_code, EventType -> event_type.
func SnakeCase(s string) string {
	rs := []rune(s)
	var b strings.Builder
	b.Grow(len(s) + 4)
	for i, r := range rs {
		if unicode.IsUpper(r) {
			if i > 0 {
				prev := rs[i-1]
				nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
				if unicode.IsLower(prev) || unicode.IsDigit(prev) || (unicode.IsUpper(prev) && nextLower) {
					b.WriteByte('_')
				}
			}
			b.WriteRune(unicode.ToLower(r))
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// typeFields lists the columns of a struct type, flattening embedded structs
// with encoding/json's rules (shallower fields win; at equal depth a tagged
// field wins; otherwise the ambiguous name is dropped).
func typeFields(t reflect.Type) ([]goField, error) {
	type queued struct {
		typ   reflect.Type
		index []int
		offs  []uintptr
	}
	current := []queued{}
	next := []queued{{typ: t}}
	count := map[reflect.Type]int{}
	nextCount := map[reflect.Type]int{}
	visited := map[reflect.Type]bool{}
	var fields []goField

	for len(next) > 0 {
		current, next = next, current[:0]
		count, nextCount = nextCount, map[reflect.Type]int{}
		for _, f := range current {
			if visited[f.typ] {
				continue
			}
			visited[f.typ] = true
			for i := 0; i < f.typ.NumField(); i++ {
				sf := f.typ.Field(i)
				if sf.Anonymous {
					et := sf.Type
					if et.Kind() == reflect.Pointer {
						et = et.Elem()
					}
					if !sf.IsExported() && et.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				ti, err := parseTags(sf)
				if err != nil {
					return nil, planErr(SnakeCase(sf.Name), "field %s: %w", sf.Name, err)
				}
				if ti.skip {
					continue
				}
				if ti.nanos && !holdsTime(sf.Type) {
					return nil, planErr(SnakeCase(sf.Name), "field %s: the ns tag option applies to time.Time fields", sf.Name)
				}
				index := append(append([]int(nil), f.index...), i)
				var offs []uintptr
				if len(f.offs) == 0 {
					offs = []uintptr{sf.Offset}
				} else {
					offs = append([]uintptr(nil), f.offs...)
					offs[len(offs)-1] += sf.Offset
				}
				ft := sf.Type
				embedPtr := false
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
					embedPtr = true
				}
				if ti.name != "" || !sf.Anonymous || ft.Kind() != reflect.Struct || isLeafStruct(ft) {
					if !sf.IsExported() {
						continue // unexported embedded non-struct
					}
					name := ti.name
					if name == "" {
						name = SnakeCase(sf.Name)
					}
					fields = append(fields, goField{
						name: name, goName: sf.Name, index: index, offs: offs, typ: sf.Type,
						required: ti.required, decimal: ti.decimal, prec: ti.prec, scale: ti.scale,
						nanos: ti.nanos, tagged: ti.name != "",
					})
					if count[f.typ] > 1 {
						fields = append(fields, fields[len(fields)-1])
					}
					continue
				}
				nextCount[ft]++
				if nextCount[ft] == 1 {
					if embedPtr {
						offs = append(offs, 0)
					}
					next = append(next, queued{typ: ft, index: index, offs: offs})
				}
			}
		}
	}

	sort.Slice(fields, func(i, j int) bool {
		x := fields
		if x[i].name != x[j].name {
			return x[i].name < x[j].name
		}
		if len(x[i].index) != len(x[j].index) {
			return len(x[i].index) < len(x[j].index)
		}
		if x[i].tagged != x[j].tagged {
			return x[i].tagged
		}
		return lessIndex(x[i].index, x[j].index)
	})
	out := fields[:0]
	for advance, i := 0, 0; i < len(fields); i += advance {
		fi := fields[i]
		for advance = 1; i+advance < len(fields); advance++ {
			if fields[i+advance].name != fi.name {
				break
			}
		}
		if advance == 1 {
			out = append(out, fi)
			continue
		}
		if dominant, ok := dominantField(fields[i : i+advance]); ok {
			out = append(out, dominant)
		}
	}
	fields = out
	sort.Slice(fields, func(i, j int) bool { return lessIndex(fields[i].index, fields[j].index) })
	return fields, nil
}

func lessIndex(a, b []int) bool {
	for k, xik := range a {
		if k >= len(b) {
			return false
		}
		if xik != b[k] {
			return xik < b[k]
		}
	}
	return len(a) < len(b)
}

func dominantField(fields []goField) (goField, bool) {
	if len(fields) > 1 && len(fields[0].index) == len(fields[1].index) && fields[0].tagged == fields[1].tagged {
		return goField{}, false
	}
	return fields[0], true
}

// fieldPtr follows a field's offsets from a struct pointer; nil when an
// embedded pointer on the way is nil.
func fieldPtr(base unsafe.Pointer, offs []uintptr) unsafe.Pointer {
	p := unsafe.Add(base, offs[0])
	for _, o := range offs[1:] {
		p = *(*unsafe.Pointer)(p)
		if p == nil {
			return nil
		}
		p = unsafe.Add(p, o)
	}
	return p
}
