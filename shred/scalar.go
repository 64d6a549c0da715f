package shred

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
)

// Scalar conversions shared by the map and JSON paths.

func anyInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case int:
		return int64(x), nil
	case json.Number:
		return parseIntText(string(x))
	case float64:
		return floatToInt(x)
	case float32:
		return floatToInt(float64(x))
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if u := rv.Uint(); u <= math.MaxInt64 {
			return int64(u), nil
		}
		return 0, fmt.Errorf("%v exceeds the int64 range: %w", v, ErrOutOfRange)
	}
	return 0, fmt.Errorf("%T is not an integer: %w", v, ErrTypeMismatch)
}

func parseIntText(s string) (int64, error) {
	i, err := strconv.ParseInt(s, 10, 64)
	if err == nil {
		return i, nil
	}
	if isIntLiteral(s) {
		return 0, fmt.Errorf("%s exceeds the int64 range: %w", s, ErrOutOfRange)
	}
	f, ferr := strconv.ParseFloat(s, 64)
	if ferr != nil {
		return 0, fmt.Errorf("%q is not a number: %w", s, ErrTypeMismatch)
	}
	return floatToInt(f)
}

// floatToInt accepts integral floats that are exact (|v| <= 2^53).
func floatToInt(f float64) (int64, error) {
	if f != math.Trunc(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%v is not an integer: %w", f, ErrTypeMismatch)
	}
	if f > 1<<53 || f < -(1<<53) {
		return 0, fmt.Errorf("%v is not exact as an integer: %w", f, ErrOutOfRange)
	}
	return int64(f), nil
}

func anyFloat(v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case float32:
		return float64(x), nil
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return 0, fmt.Errorf("%q: %w", string(x), ErrOutOfRange)
		}
		return f, nil
	}
	i, err := anyInt(v)
	if err != nil {
		return 0, fmt.Errorf("%T is not a number: %w", v, ErrTypeMismatch)
	}
	if i > 1<<53 || i < -(1<<53) {
		return 0, fmt.Errorf("%d is not exact as float64: %w", i, ErrOutOfRange)
	}
	return float64(i), nil
}

func checkIntRange(v int64, bits int) error {
	if bits < 64 {
		lo, hi := int64(-1)<<(bits-1), int64(1)<<(bits-1)-1
		if v < lo || v > hi {
			return fmt.Errorf("%d does not fit int%d: %w", v, bits, ErrOutOfRange)
		}
	}
	return nil
}

var unitPerSecond = [...]int64{arrow.Second: 1, arrow.Millisecond: 1e3, arrow.Microsecond: 1e6, arrow.Nanosecond: 1e9}

// epochTo converts v from unit from to unit to, exactly.
func epochTo(v int64, from, to arrow.TimeUnit) (int64, error) {
	f, t := unitPerSecond[from], unitPerSecond[to]
	switch {
	case f == t:
		return v, nil
	case t > f:
		m := t / f
		if v > math.MaxInt64/m || v < math.MinInt64/m {
			return 0, fmt.Errorf("epoch %d overflows timestamp[%s]: %w", v, to, ErrOutOfRange)
		}
		return v * m, nil
	default:
		d := f / t
		if v%d != 0 {
			return 0, fmt.Errorf("epoch %d %s is not exact in %s: %w", v, from, to, ErrOutOfRange)
		}
		return v / d, nil
	}
}

// timeTo converts t to unit since the epoch; a time outside what an int64
// holds in that unit is an error (never a wrap-around). Microseconds and
// coarser units truncate the finer digits toward the past.
func timeTo(t time.Time, unit arrow.TimeUnit) (int64, error) {
	switch unit {
	case arrow.Second:
		return t.Unix(), nil
	case arrow.Millisecond:
		if t.Before(minMilliTime) || t.After(maxMilliTime) {
			return 0, timeRangeErr(t, unit)
		}
		return t.UnixMilli(), nil
	case arrow.Microsecond:
		if t.Before(minMicroTime) || t.After(maxMicroTime) {
			return 0, timeRangeErr(t, unit)
		}
		return t.UnixMicro(), nil
	}
	if t.Before(minNanoTime) || t.After(maxNanoTime) {
		return 0, timeRangeErr(t, unit)
	}
	return t.UnixNano(), nil
}

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return t, fmt.Errorf("%q is not an RFC 3339 timestamp: %w", s, ErrTypeMismatch)
	}
	return t, nil
}

func dateOf(t time.Time) (arrow.Date32, error) {
	u := t.Unix()
	d := u / 86400
	if u%86400 < 0 {
		d--
	}
	if d < math.MinInt32 || d > math.MaxInt32 {
		return 0, fmt.Errorf("%v is outside the date32 range: %w", t, ErrOutOfRange)
	}
	return arrow.Date32(d), nil
}

func parseDate(s string) (arrow.Date32, error) {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		if t, err = parseTime(s); err != nil {
			return 0, fmt.Errorf("%q is not a date: %w", s, ErrTypeMismatch)
		}
	}
	return dateOf(t)
}

func parseDecimal(s string, prec, scale int32) (decimal128.Num, error) {
	n, err := decimal128.FromString(s, prec, scale)
	if err != nil {
		return n, fmt.Errorf("%q as decimal(%d,%d): %w", s, prec, scale, ErrOutOfRange)
	}
	if !n.FitsInPrecision(prec) {
		return n, fmt.Errorf("%q does not fit decimal(%d,%d): %w", s, prec, scale, ErrOutOfRange)
	}
	// FromString rounds extra fractional digits: refuse a lossy value.
	if back, err := decimal128.FromString(n.ToString(scale), prec, scale); err != nil || back != n || !sameDecimal(s, n.ToString(scale)) {
		return n, fmt.Errorf("%q is not exact in decimal(%d,%d): %w", s, prec, scale, ErrOutOfRange)
	}
	return n, nil
}

// sameDecimal compares two decimal strings numerically for the digits given.
func sameDecimal(a, b string) bool {
	x, ok1 := new(big.Rat).SetString(a)
	y, ok2 := new(big.Rat).SetString(b)
	return ok1 && ok2 && x.Cmp(y) == 0
}
