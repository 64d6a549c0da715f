package shred

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// A small JSON scanner: it delimits and validates values in place so the
// JSON lines path can append straight into builders without decoding into
// Go maps.

// errSyntax is wrapped by errors about malformed JSON text.
var errSyntax = ErrInvalidJSON

const maxDepth = 1000

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func skipSpace(d []byte, i int) int {
	for i < len(d) && isSpace(d[i]) {
		i++
	}
	return i
}

func syntaxErr(d []byte, i int, what string) error {
	return fmt.Errorf("%w at offset %d: %s", errSyntax, i, what)
}

// scanValue returns the end of the JSON value starting at d[i].
func scanValue(d []byte, i, depth int) (int, error) {
	if i >= len(d) {
		return i, syntaxErr(d, i, "unexpected end")
	}
	switch c := d[i]; {
	case c == '"':
		end, _, err := scanString(d, i)
		return end, err
	case c == '{':
		if depth > maxDepth {
			return i, syntaxErr(d, i, "too deep")
		}
		i = skipSpace(d, i+1)
		if i < len(d) && d[i] == '}' {
			return i + 1, nil
		}
		for {
			if i >= len(d) || d[i] != '"' {
				return i, syntaxErr(d, i, "want object key")
			}
			var err error
			if i, _, err = scanString(d, i); err != nil {
				return i, err
			}
			i = skipSpace(d, i)
			if i >= len(d) || d[i] != ':' {
				return i, syntaxErr(d, i, "want ':'")
			}
			if i, err = scanValue(d, skipSpace(d, i+1), depth+1); err != nil {
				return i, err
			}
			more := false
			if i, more, err = nextElem(d, i, '}'); !more {
				return i, err
			}
		}
	case c == '[':
		if depth > maxDepth {
			return i, syntaxErr(d, i, "too deep")
		}
		i = skipSpace(d, i+1)
		if i < len(d) && d[i] == ']' {
			return i + 1, nil
		}
		for {
			var err error
			if i, err = scanValue(d, i, depth+1); err != nil {
				return i, err
			}
			more := false
			if i, more, err = nextElem(d, i, ']'); !more {
				return i, err
			}
		}
	case c == 't':
		return scanLit(d, i, "true")
	case c == 'f':
		return scanLit(d, i, "false")
	case c == 'n':
		return scanLit(d, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return scanNumber(d, i)
	}
	return i, syntaxErr(d, i, "unexpected character")
}

// nextElem moves past the separator after an object's or array's element
// ending at i: more reports a ',' (next is the start of the next element),
// else next is past the closing byte.
func nextElem(d []byte, i int, closing byte) (next int, more bool, err error) {
	i = skipSpace(d, i)
	if i < len(d) && d[i] == ',' {
		return skipSpace(d, i+1), true, nil
	}
	if i < len(d) && d[i] == closing {
		return i + 1, false, nil
	}
	return i, false, syntaxErr(d, i, "want ',' or '"+string(closing)+"'")
}

func scanLit(d []byte, i int, lit string) (int, error) {
	if len(d)-i >= len(lit) && string(d[i:i+len(lit)]) == lit {
		return i + len(lit), nil
	}
	return i, syntaxErr(d, i, "bad literal")
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func scanNumber(d []byte, i int) (int, error) {
	start := i
	if d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	default:
		return start, syntaxErr(d, i, "bad number")
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || !isDigit(d[i]) {
			return start, syntaxErr(d, i, "bad number")
		}
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || !isDigit(d[i]) {
			return start, syntaxErr(d, i, "bad number")
		}
		for i < len(d) && isDigit(d[i]) {
			i++
		}
	}
	return i, nil
}

// scanString returns the end of the string starting at d[i] and whether it
// has escapes. It validates escapes, control characters and UTF-8.
func scanString(d []byte, i int) (int, bool, error) {
	i++
	escaped := false
	for i < len(d) {
		c := d[i]
		switch {
		case c == '"':
			return i + 1, escaped, nil
		case c == '\\':
			escaped = true
			if i+1 >= len(d) {
				return i, escaped, syntaxErr(d, i, "bad escape")
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(d) || !isHex4(d[i+2:i+6]) {
					return i, escaped, syntaxErr(d, i, "bad \\u escape")
				}
				i += 6
			default:
				return i, escaped, syntaxErr(d, i, "bad escape")
			}
		case c < 0x20:
			return i, escaped, syntaxErr(d, i, "control character in string")
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size == 1 {
				return i, escaped, syntaxErr(d, i, "invalid UTF-8")
			}
			i += size
		}
	}
	return i, escaped, syntaxErr(d, i, "unterminated string")
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !(isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')) {
			return false
		}
	}
	return true
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case isDigit(c):
			r |= rune(c - '0')
		case c >= 'a':
			r |= rune(c - 'a' + 10)
		default:
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

// unquote returns the contents of the validated string token s (quotes
// included), unescaping into buf when needed.
func unquote(s []byte, escaped bool, buf []byte) ([]byte, []byte) {
	s = s[1 : len(s)-1]
	if !escaped {
		return s, buf
	}
	buf = buf[:0]
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			buf = append(buf, c)
			i++
			continue
		}
		switch s[i+1] {
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r := hex4(s[i+2 : i+6])
			i += 6
			if utf16.IsSurrogate(r) {
				if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
					if r2 := utf16.DecodeRune(r, hex4(s[i+2:i+6])); r2 != utf8.RuneError {
						r = r2
						i += 6
					} else {
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			buf = utf8.AppendRune(buf, r)
			continue
		default: // '"', '\\', '/'
			buf = append(buf, s[i+1])
		}
		i += 2
	}
	return buf, buf
}
