// Package variantjson converts JSON text to a variant value for the sources (the Kafka sink's JSONVariant, the
// Postgres source's json and jsonb columns), in one place so that a faster converter can replace arrow-go's
// here.
package variantjson

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/parquet/variant"
)

// ErrInexact is wrapped by Parse's error for a number no variant holds exactly: past 38 digits and not a double
// that prints back as the same number (123456789012345678901234567890123456789012, 1e-400), or past a double's
// range (1e400).
var ErrInexact = errors.New("JSON number has no exact variant value")

// Parse converts one JSON document to a variant value with arrow-go's parquet/variant: objects keep the last
// value of a key given twice (as encoding/json, and Postgres's json functions and jsonb, do), integers become
// the smallest variant integer that holds them, other numbers decimals of up to 38 digits, else doubles. A
// document that is not valid JSON, has anything after it, or holds a number no variant holds exactly
// (ErrInexact) is an error.
func Parse(doc []byte) (variant.Value, error) {
	if err := check(doc); err != nil {
		return variant.Value{}, err
	}
	return parse(doc)
}

// check validates doc and its numbers: what arrow-go's parser would otherwise accept after the document, round
// without a word or panic on. Once doc is valid JSON, a number is a run of number bytes outside strings.
func check(doc []byte) error {
	if !json.Valid(doc) {
		var v any
		return fmt.Errorf("invalid JSON: %w", json.Unmarshal(doc, &v))
	}
	inString := false
	for i := 0; i < len(doc); i++ {
		c := doc[i]
		switch {
		case inString:
			if c == '\\' {
				i++ // the escaped byte
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '-' || (c >= '0' && c <= '9'):
			j := i + 1
			for j < len(doc) && strings.IndexByte("0123456789+-.eE", doc[j]) >= 0 {
				j++
			}
			if err := exact(string(doc[i:j])); err != nil {
				return err
			}
			i = j - 1
		}
	}
	return nil
}

// exact reports whether arrow-go's parser keeps the number s: an int64, a decimal of at most 38 digits without
// an exponent, or a double that prints back as s's number.
func exact(s string) error {
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return nil
	}
	if !strings.ContainsAny(s, "eE") {
		if precision(s) <= 38 {
			return nil
		}
		if strings.Contains(s, ".") { // arrow-go rounds it to a double, or panics
			return fmt.Errorf("%w: %s", ErrInexact, s)
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err == nil {
		want, _ := new(big.Rat).SetString(s)
		got, _ := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
		if want != nil && got != nil && want.Cmp(got) == 0 {
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrInexact, s)
}

// precision is the number of digits a decimal needs for a JSON number without exponent: the integer part's
// without leading zeros, and every digit of the fraction.
func precision(s string) int {
	whole, frac, _ := strings.Cut(strings.TrimLeft(s, "-"), ".")
	return len(strings.TrimLeft(whole, "0")) + len(frac)
}

// parse is variant.ParseJSONBytes with its panics as errors (arrow-go v18.8.0 panics on some decimals).
func parse(doc []byte) (v variant.Value, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("JSON has no variant value (arrow-go: %v)", r)
		}
	}()
	return variant.ParseJSONBytes(doc, true)
}
