// Package redact keeps secrets (passwords, tokens, OAuth2 client secrets, access keys) out of error messages and
// printed URIs. It is used by the catalog and storage backends, whose errors often quote a DSN or a property map.
package redact

import (
	"net/url"
	"sort"
	"strings"
)

// Mask replaces every secret in a message.
const Mask = "xxxxx"

// IsSecretKey reports whether a property or query parameter name holds a secret: its value is never printed.
func IsSecretKey(k string) bool {
	k = strings.ToLower(k)
	for _, s := range []string{"secret", "token", "credential", "password", "passwd", "pwd", "sas", "private-key", "signature", "authorization", "api-key", "apikey", "session-key"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// Secrets returns the values of the properties whose names hold secrets, and for an OAuth2 credential
// "id:secret" also the secret part alone.
func Secrets(props map[string]string) []string {
	var out []string
	for k, v := range props {
		if v == "" || !IsSecretKey(k) {
			continue
		}
		out = append(out, v)
		if _, sec, ok := strings.Cut(v, ":"); ok && sec != "" {
			out = append(out, sec)
		}
	}
	return out
}

// URLSecrets returns the password of u's user info and the values of its secret query parameters.
func URLSecrets(u *url.URL) []string {
	var out []string
	if u == nil {
		return nil
	}
	if p, ok := u.User.Password(); ok && p != "" {
		out = append(out, p)
	}
	for k, vs := range u.Query() {
		if !IsSecretKey(k) {
			continue
		}
		for _, v := range vs {
			if v != "" {
				out = append(out, v)
			}
		}
	}
	return out
}

// URL prints u with its password and secret query parameters masked.
func URL(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	if c.User != nil {
		if _, ok := c.User.Password(); ok {
			c.User = url.UserPassword(c.User.Username(), Mask)
		}
	}
	if c.RawQuery != "" {
		q := c.Query()
		for k, vs := range q {
			if IsSecretKey(k) {
				for i := range vs {
					vs[i] = Mask
				}
			}
		}
		c.RawQuery = q.Encode()
	}
	return c.String()
}

// String replaces every secret (and its URL-encoded forms) in s with Mask. Longer secrets are replaced first,
// so that a secret that contains another is masked whole.
func String(s string, secrets ...string) string {
	var all []string
	for _, sec := range secrets {
		if len(sec) < 3 { // too short to mask without destroying the message; never a real secret
			continue
		}
		all = append(all, sec, url.QueryEscape(sec), url.PathEscape(sec))
	}
	sort.Slice(all, func(i, j int) bool { return len(all[i]) > len(all[j]) })
	for _, sec := range all {
		s = strings.ReplaceAll(s, sec, Mask)
	}
	return s
}

// Error returns err with every secret masked in its message. errors.Is and errors.As still see err; only the
// text changes. A nil err stays nil, and an err whose message holds no secret is returned as it is.
func Error(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	red := String(msg, secrets...)
	if red == msg {
		return err
	}
	return &redacted{msg: red, err: err}
}

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }
