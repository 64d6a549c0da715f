// Package redacttest checks errors for secrets, for the tests of every package that masks them (the redact
// layer itself, the catalogs, the writer).
package redacttest

import (
	"fmt"
	"strings"
)

// Leaks returns a line for every secret found in err's message, its %+v, %#v and %q forms, or those of any
// error reachable through Unwrap() error and Unwrap() []error (at most 1,000 errors are visited).
func Leaks(err error, secrets ...string) []string {
	var out []string
	seen := 0
	var walk func(e error)
	walk = func(e error) {
		if e == nil || seen > 1000 {
			return
		}
		seen++
		for _, text := range []string{e.Error(), fmt.Sprintf("%+v", e), fmt.Sprintf("%#v", e), fmt.Sprintf("%q", e)} {
			for _, s := range secrets {
				if strings.Contains(text, s) {
					out = append(out, fmt.Sprintf("%q in a %T of the error chain: %s", s, e, text))
				}
			}
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, c := range u.Unwrap() {
				walk(c)
			}
		}
	}
	walk(err)
	return out
}
