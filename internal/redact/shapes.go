package redact

import (
	"regexp"
	"strings"
)

// Secret shapes: values that are secrets by their form or by the name they are given, whoever produced them. A
// REST server that echoes a request puts the Authorization header or a form body in its reply; an object store's
// error may quote a presigned URL; a database driver may quote its DSN.
var (
	// authScheme is an HTTP Authorization value: the scheme stays, the credentials go. Bearer tokens may be
	// short in tests, Basic credentials are base64 of user:password.
	authScheme = regexp.MustCompile(`(?i)\b(bearer|basic|digest|negotiate|token)(\s+)([A-Za-z0-9\-._~+/=%:]{4,})`)
	// jwt is a JSON Web Token (OAuth2 access tokens and ID tokens often are).
	jwt = regexp.MustCompile(`\beyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*`)
	// userInfo is scheme://user:password@ in a URL.
	userInfo = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://)([^/\s:@?#"']*):([^/\s@?#"']+)@`)
	// mysqlDSN is user:password@tcp(host) (go-sql-driver/mysql's DSN form).
	mysqlDSN = regexp.MustCompile(`([A-Za-z0-9_.\-]+):([^\s:@/"']+)@(tcp|tcp6|unix|udp)\(`)
	// jsonPair is "name": "value", also with escaped quotes (a JSON document quoted inside a JSON string).
	jsonPair = regexp.MustCompile(`("|\\")([A-Za-z0-9_.\-]{1,100})("|\\")(\s*:\s*)("|\\")((?:[^"\\]|\\[^"])*)`)
	// keyValue is name=value: query strings, form bodies, DSNs, connection strings, SigV4 Authorization values.
	keyValue = regexp.MustCompile(`([A-Za-z0-9_.\-]{1,100})(=)([^&\s"',;<>\])}]+)`)
	// header is "Name: value" or Go's printed http.Header "Name:[value]".
	header = regexp.MustCompile(`([A-Za-z0-9_.\-]{1,100})(:[ \t]*\[?)([^\s"',;<>\])}]+)`)
)

// authSchemes are words that may follow an Authorization header's colon: they stay, authScheme masks what
// follows them.
var authSchemes = map[string]bool{"bearer": true, "basic": true, "digest": true, "negotiate": true, "token": true,
	"aws4-hmac-sha256": true}

// maskShapes masks every secret shape in s.
func maskShapes(s string) string {
	if s == "" {
		return s
	}
	s = userInfo.ReplaceAllString(s, "${1}${2}:"+Mask+"@")
	s = mysqlDSN.ReplaceAllString(s, "${1}:"+Mask+"@${3}(")
	s = jwt.ReplaceAllString(s, Mask)
	s = replaceNamed(jsonPair, s, 2, 6)
	s = replaceNamed(keyValue, s, 1, 3)
	s = replaceNamed(header, s, 1, 3)
	s = authScheme.ReplaceAllStringFunc(s, func(m string) string {
		sub := authScheme.FindStringSubmatch(m)
		if strings.EqualFold(sub[1], "token") && !strings.ContainsAny(sub[3], "0123456789") {
			return m // "token refused": prose, not a credential
		}
		return sub[1] + sub[2] + Mask
	})
	return s
}

// replaceNamed masks submatch val of every match of re whose submatch name is a secret key.
func replaceNamed(re *regexp.Regexp, s string, name, val int) string {
	idx := re.FindAllStringSubmatchIndex(s, -1)
	if idx == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range idx {
		ns, ne, vs, ve := m[2*name], m[2*name+1], m[2*val], m[2*val+1]
		if vs < 0 || vs == ve || !IsSecretKey(s[ns:ne]) || s[vs:ve] == Mask || authSchemes[strings.ToLower(s[vs:ve])] {
			continue
		}
		b.WriteString(s[last:vs])
		b.WriteString(Mask)
		last = ve
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}
