package redact

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"reflect"
	"strings"
)

// Error returns err with every known secret and secret shape masked, in its message and in every error its
// chain unwraps to. A nil err stays nil.
//
// An error whose whole chain consists of plain values (errors.New, fmt.Errorf wrappers, errors.Join, context
// errors) and whose messages hold nothing to mask is returned as it is, so that ordinary errors keep their
// identity. Any other error is replaced by a masked error:
//
//   - Error() and every fmt verb (%v, %+v, %s, %q, %#v) print the masked message.
//   - Unwrap returns masked copies of err's causes, never err itself: walking the chain (Unwrap() error and
//     Unwrap() []error) meets only masked messages.
//   - Is answers for the original chain, so errors.Is with sentinels (catalog.ErrNoSuchTable,
//     table.ErrCommitFailed, rest.ErrForbidden, context.Canceled, ...) works as before. Is reveals a single
//     bit, never a message.
//   - As is where a typed error could hand out a secret in a field its message does not print (a REST error's
//     echoed stack, an AWS response error's request headers). As finds the target type in the original chain
//     and then gives a masked copy (*url.Error, *fs.PathError), or the value itself when neither its message
//     nor any string reachable from its fields holds a secret; otherwise As fails. The trade-off: errors.As
//     to a typed error that carries a secret fails instead of returning it; code that needs such a value must
//     use the backend's own catalog (catalog.Backend), whose errors are not masked.
func (r *Redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	if plainAndClean(r, err, 0) {
		return err
	}
	e := redacted{msg: r.String(err.Error()), orig: err, r: r}
	// The masked error unwraps the way the original does, so that errors.Unwrap still steps to the (masked)
	// cause of a single-cause error.
	switch err.(type) {
	case interface{ Unwrap() error }:
		return &redactedOne{e}
	case interface{ Unwrap() []error }:
		return &redactedMany{e}
	}
	return &e
}

// redacted is an error whose message and chain are masked; see Redactor.Error. redactedOne and redactedMany
// add the Unwrap of an original with one cause or several.
type redacted struct {
	msg  string
	orig error // never exposed: Unwrap masks each cause, As checks what it hands out
	r    *Redactor
}

type (
	redactedOne  struct{ redacted }
	redactedMany struct{ redacted }
)

func (e *redacted) Error() string { return e.msg }

// GoString keeps %#v from printing the original error's fields.
func (e *redacted) GoString() string { return fmt.Sprintf("redact.Error(%q)", e.msg) }

func (e *redacted) maskedBy() *Redactor { return e.r }

// Unwrap returns the masked copy of the original error's cause.
func (e *redactedOne) Unwrap() error {
	return e.r.Error(e.orig.(interface{ Unwrap() error }).Unwrap())
}

// Unwrap returns masked copies of the original error's causes.
func (e *redactedMany) Unwrap() []error {
	causes := e.orig.(interface{ Unwrap() []error }).Unwrap()
	out := make([]error, 0, len(causes))
	for _, c := range causes {
		if c != nil {
			out = append(out, e.r.Error(c))
		}
	}
	return out
}

// Is reports whether the original chain matches target.
func (e *redacted) Is(target error) bool { return errors.Is(e.orig, target) }

// As finds target's type in the original chain and sets target to a masked copy or to a value that holds no
// secret; see Redactor.Error.
func (e *redacted) As(target any) bool {
	tv := reflect.ValueOf(target)
	if tv.Kind() != reflect.Pointer || tv.IsNil() {
		return false
	}
	tmp := reflect.New(tv.Type().Elem())
	if !errors.As(e.orig, tmp.Interface()) {
		return false
	}
	found := tmp.Elem()
	if c, ok := e.r.maskedCopy(found.Interface()); ok {
		cv := reflect.ValueOf(c)
		if !cv.Type().AssignableTo(found.Type()) {
			return false
		}
		tv.Elem().Set(cv)
		return true
	}
	if e.r.holdsSecret(found) {
		return false
	}
	tv.Elem().Set(found)
	return true
}

// maskedCopy returns a copy of v with its secrets masked, for error types whose secret is part of what callers
// read from them (the URL of a url.Error, the path of a PathError).
func (r *Redactor) maskedCopy(v any) (any, bool) {
	switch e := v.(type) {
	case *url.Error:
		if e == nil {
			return nil, false
		}
		return &url.Error{Op: e.Op, URL: r.String(maskURLString(e.URL)), Err: r.Error(e.Err)}, true
	case *fs.PathError:
		if e == nil {
			return nil, false
		}
		return &fs.PathError{Op: e.Op, Path: r.String(maskURLString(e.Path)), Err: r.Error(e.Err)}, true
	}
	return nil, false
}

// maskURLString masks the secret query parameters and password of a URL given as text.
func maskURLString(s string) string {
	if !strings.Contains(s, "?") && !strings.Contains(s, "@") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil {
		return s
	}
	return URL(u)
}

// plainAndClean reports whether err's chain consists only of plain error values whose messages hold nothing
// to mask.
func plainAndClean(r *Redactor, err error, depth int) bool {
	if m, ok := err.(interface{ maskedBy() *Redactor }); ok && m.maskedBy() == r {
		return true // masked by r already, causes included
	}
	if depth > 32 || !isPlain(err) {
		return false
	}
	if msg := err.Error(); r.String(msg) != msg {
		return false
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if c := u.Unwrap(); c != nil {
			return plainAndClean(r, c, depth+1)
		}
	case interface{ Unwrap() []error }:
		for _, c := range u.Unwrap() {
			if c != nil && !plainAndClean(r, c, depth+1) {
				return false
			}
		}
	}
	return true
}

// plainTypes are the error types that hold nothing but their message and their causes.
var plainTypes = map[reflect.Type]bool{
	reflect.TypeOf(errors.New("")):                                      true, // *errors.errorString
	reflect.TypeOf(fmt.Errorf("%w", errors.New(""))):                    true, // *fmt.wrapError
	reflect.TypeOf(fmt.Errorf("%w %w", errors.New(""), errors.New(""))): true, // *fmt.wrapErrors
	reflect.TypeOf(errors.Join(errors.New(""))):                         true, // *errors.joinError
}

func isPlain(err error) bool {
	if plainTypes[reflect.TypeOf(err)] {
		return true
	}
	// context.Canceled is an errorString; DeadlineExceeded is its own type with a fixed message.
	t := reflect.TypeOf(err)
	return t.PkgPath() == "context" || (t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "context")
}

// holdsSecret reports whether v's message, its %+v form, or any string reachable from its fields (within a
// bounded walk) holds a secret. A walk that runs out of budget counts as holding one.
func (r *Redactor) holdsSecret(v reflect.Value) bool {
	if v.CanInterface() {
		if e, ok := v.Interface().(error); ok && !isNil(v) {
			if s := safeSprint(e, false); r.String(s) != s {
				return true
			}
			if s := safeSprint(e, true); r.String(s) != s {
				return true
			}
		}
	}
	return r.walkFields(v)
}

// walkFields runs the bounded walk; a value the walk cannot read (a panic in reflection) counts as holding a
// secret.
func (r *Redactor) walkFields(v reflect.Value) (found bool) {
	defer func() {
		if recover() != nil {
			found = true
		}
	}()
	w := walker{r: r, seen: map[seenKey]bool{}, budget: 20000}
	return w.walk(v, 0)
}

func isNil(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return v.IsNil()
	}
	return false
}

// safeSprint formats e with %v or %+v; a formatter that panics counts as printing a secret.
func safeSprint(e error, plus bool) (s string) {
	defer func() {
		if recover() != nil {
			s = Mask + "\x00unprintable"
		}
	}()
	if plus {
		return fmt.Sprintf("%+v", e)
	}
	return e.Error()
}

type walker struct {
	r      *Redactor
	seen   map[seenKey]bool
	budget int
}

// seenKey is a pointer visited by the walk; the type tells a struct from its first field.
type seenKey struct {
	p uintptr
	t reflect.Type
}

const maxWalkDepth = 12

// walk reports whether a string, byte slice or secret-named map entry reachable from v holds a secret.
func (w *walker) walk(v reflect.Value, depth int) bool {
	w.budget--
	if w.budget < 0 || depth > maxWalkDepth {
		return true
	}
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		return w.r.String(s) != s
	case reflect.Pointer:
		if v.IsNil() {
			return false
		}
		k := seenKey{v.Pointer(), v.Type()}
		if w.seen[k] {
			return false
		}
		w.seen[k] = true
		return w.walk(v.Elem(), depth+1)
	case reflect.Interface:
		if v.IsNil() {
			return false
		}
		return w.walk(v.Elem(), depth+1)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if w.walk(v.Field(i), depth+1) {
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice {
			if v.IsNil() {
				return false
			}
			if v.Type().Elem().Kind() == reflect.Uint8 {
				s := string(v.Bytes())
				return w.r.String(s) != s
			}
		}
		for i := 0; i < v.Len(); i++ {
			if w.walk(v.Index(i), depth+1) {
				return true
			}
		}
	case reflect.Map:
		if v.IsNil() {
			return false
		}
		it := v.MapRange()
		for it.Next() {
			k := it.Key()
			if k.Kind() == reflect.String && IsSecretKey(k.String()) && !emptyValue(it.Value()) {
				return true
			}
			if w.walk(k, depth+1) || w.walk(it.Value(), depth+1) {
				return true
			}
		}
	case reflect.Func, reflect.Chan, reflect.UnsafePointer, reflect.Uintptr:
		// Nothing readable: a closure's captured values cannot be reached, and are not part of an error's data.
	}
	return false
}

// emptyValue reports whether a map value is empty ("" or a slice of empty strings, as in http.Header).
func emptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		return v.Len() == 0
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			if !emptyValue(v.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Interface, reflect.Pointer:
		return v.IsNil() || emptyValue(v.Elem())
	}
	return false
}
