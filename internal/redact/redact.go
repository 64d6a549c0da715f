// Package redact keeps secrets (passwords, secret keys, session and bearer tokens, OAuth2 client secrets, SAS
// tokens) out of error messages, unwrapped error chains, log lines and printed URIs.
//
// Two kinds of secret are masked. Known secrets are the values a Redactor was given: the password and secret
// query parameters of the URI a catalog was opened with and its secret properties. Secret shapes are masked
// whether or not the value was known, because a server may echo what it received (a request's headers or body)
// in its error reply, including a token it issued itself: "Authorization: Bearer ...", "Basic ...", JWTs,
// key=value and "key": "value" pairs whose key names a secret (client_secret=, access_token=, password=,
// X-Amz-Security-Token=, X-Amz-Signature=, Signature=, sig=, AccountKey=...), header lines such as
// "X-Amz-Security-Token: ...", and user:password@ in URLs and MySQL DSNs.
//
// It is used by package catalog (every catalog Open returns masks its errors), by the storage backends, and by
// the Writer (its catalog calls, its failure error and its log lines).
package redact

import (
	"encoding/base64"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Mask replaces every secret in a message.
const Mask = "xxxxx"

// secretWords are substrings of property, query parameter and header names that hold secrets.
var secretWords = []string{"secret", "token", "credential", "password", "passwd", "pwd", "sas", "private-key",
	"private_key", "signature", "authorization", "api-key", "api_key", "apikey", "session-key", "shared-key",
	"accountkey", "account-key", "account.key", "jsonkey", "connection-string", "connectionstring", "sse.key",
	"cookie"}

// secretNames are names that hold secrets only when they are the whole name (sig is the signature of an Azure
// SAS token; as a substring it would match far too much).
var secretNames = map[string]bool{"sig": true}

// IsSecretKey reports whether a property, query parameter or header name holds a secret: its value is never
// printed.
func IsSecretKey(k string) bool {
	k = strings.ToLower(k)
	if secretNames[k] {
		return true
	}
	for _, s := range secretWords {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// Secrets returns the values of the properties whose names hold secrets, and for an OAuth2 credential
// "id:secret" also the secret part alone; for a value with an authentication scheme ("Bearer xyz") also the
// parts after it.
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
		if f := strings.Fields(v); len(f) > 1 {
			out = append(out, f[1:]...)
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

// String masks the given secrets (and their encoded forms) and every secret shape in s.
func String(s string, secrets ...string) string { return New(secrets...).String(s) }

// Error returns err with the given secrets and every secret shape masked: see Redactor.Error.
func Error(err error, secrets ...string) error { return New(secrets...).Error(err) }

// minSecret is the length under which a known secret is not masked: shorter values would destroy the message,
// and are never real secrets.
const minSecret = 3

// A Redactor masks a fixed set of known secrets plus every secret shape. The zero value and nil mask shapes
// only. A Redactor is immutable and safe for concurrent use.
type Redactor struct {
	known []string // every form of every known secret, longest first
}

// New returns a Redactor for the given secrets (empty values and values under 3 bytes are ignored). Besides
// each value it masks its URL-encoded, JSON-escaped and base64 forms (a client id:secret in a Basic header).
func New(secrets ...string) *Redactor {
	return (*Redactor)(nil).With(secrets...)
}

// With returns a Redactor that masks r's secrets and the given ones.
func (r *Redactor) With(secrets ...string) *Redactor {
	seen := map[string]bool{}
	var all []string
	add := func(s string) {
		if len(s) >= minSecret && !seen[s] {
			seen[s] = true
			all = append(all, s)
		}
	}
	if r != nil {
		for _, s := range r.known {
			add(s)
		}
	}
	for _, sec := range secrets {
		if len(sec) < minSecret {
			continue
		}
		add(sec)
		add(url.QueryEscape(sec))
		add(url.PathEscape(sec))
		if q := strconv.Quote(sec); q[1:len(q)-1] != sec {
			add(q[1 : len(q)-1])
		}
		add(base64.StdEncoding.EncodeToString([]byte(sec)))
		add(base64.RawURLEncoding.EncodeToString([]byte(sec)))
	}
	if r != nil && len(all) == len(r.known) {
		return r
	}
	sort.SliceStable(all, func(i, j int) bool { return len(all[i]) > len(all[j]) })
	return &Redactor{known: all}
}

// String replaces every known secret (longest first, so that a secret containing another is masked whole)
// and then every secret shape in s with Mask.
func (r *Redactor) String(s string) string {
	if r != nil {
		for _, sec := range r.known {
			if strings.Contains(s, sec) {
				s = strings.ReplaceAll(s, sec, Mask)
			}
		}
	}
	return maskShapes(s)
}
