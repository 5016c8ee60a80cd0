package redact

import "strings"

// findColonFields returns the spans of the credentials in "Name: value"
// fields: the Authorization and Proxy-Authorization headers of any scheme
// (Basic, Bearer, Digest, token...), headers named for a credential
// (X-Api-Key, Private-Token, X-Auth-Token) and settings at the start of a
// line (YAML "password: hunter2"). Authorization may be anywhere; another
// field's name starts a line or follows a quote (curl -H 'X-Api-Key: ...'),
// and its value is one word, so that prose ("Password: at least 8
// characters") is left alone.
func findColonFields(s string, m *meter) []span {
	q := &quotes{s: s, m: m, from: [2]int{-1, -1}, to: [2]int{-1, -1}}
	var out []span
	for i := 0; i < len(s); {
		c := strings.IndexByte(s[i:], ':')
		if c < 0 {
			m.add(len(s) - i)
			return out
		}
		m.add(c + 1)
		c += i
		i = c + 1
		n := c
		for n > 0 && c-n < 64 && isHeaderNameByte(s[n-1]) {
			n--
		}
		m.add(c - n)
		if n == c || !isLetter(s[n]) {
			continue
		}
		if n > 0 && isHeaderNameByte(s[n-1]) {
			continue // a name longer than any field's
		}
		name := s[n:c]
		lineStart, enclose := fieldContext(s, n, m)
		var sp span
		var next int
		ok := false
		switch {
		case strings.EqualFold(name, "authorization") || strings.EqualFold(name, "proxy-authorization"):
			sp, next, ok = authorizationValue(s, c+1, enclose, m)
		case !lineStart && enclose == 0:
		case strings.IndexByte(name, '-') >= 0 || lineStart:
			if kind := fieldKind(name); kind != "" {
				sp, next, ok = settingValue(s, c+1, kind, enclose, q, m)
			}
		}
		i = max(i, next)
		if ok {
			out = append(out, sp)
		}
	}
	return out
}

// isHeaderNameByte reports whether c may be part of a field name.
func isHeaderNameByte(c byte) bool { return isWordByte(c) || c == '-' }

// fieldContext reports whether the name at s[n] starts its line (after
// indentation or a YAML "- "), or else the quote that opens it (0 if none).
func fieldContext(s string, n int, m *meter) (lineStart bool, enclose byte) {
	if n > 0 && (s[n-1] == '"' || s[n-1] == '\'') {
		return false, s[n-1]
	}
	j := n
	for j > 0 && n-j < 64 && (s[j-1] == ' ' || s[j-1] == '\t' || s[j-1] == '-') {
		j--
	}
	m.add(n - j)
	return j == 0 || s[j-1] == '\n' || s[j-1] == '\r', 0
}

// lineEnd reports whether s[i:] holds only blanks before the end of the
// line, of s, or the closing quote enclose.
func lineEnd(s string, i int, enclose byte, m *meter) bool {
	j := skipBlanks(s, i)
	m.add(j - i)
	return j == len(s) || s[j] == '\n' || s[j] == '\r' || enclose != 0 && s[j] == enclose
}

// Authorization schemes whose credentials are a list of parameters, and
// those whose credential is one token.
var (
	paramSchemes = map[string]bool{"digest": true, "hoba": true, "mutual": true, "hawk": true, "oauth": true,
		"aws4-hmac-sha256": true, "signature": true, "scram-sha-1": true, "scram-sha-256": true, "vapid": true}
	tokenSchemes = map[string]bool{"basic": true, "bearer": true, "token": true, "negotiate": true, "ntlm": true,
		"apikey": true, "api-key": true, "key": true, "sso-key": true, "ssws": true, "dpop": true, "gsa": true,
		"splunk": true, "jwt": true, "session": true, "access-token": true}
)

// authorizationValue returns the span of the credentials of an
// Authorization header whose value starts at s[i]: everything after the
// scheme (Digest's parameters up to the end of the line or the closing
// quote), or the value itself when it has no scheme and looks like a token.
// next is where scanning may go on.
func authorizationValue(s string, i int, enclose byte, m *meter) (sp span, next int, ok bool) {
	j := skipBlanks(s, i)
	w := runEnd(s, j, isHeaderNameByte, m)
	next = w
	if w == j || w-j > 32 {
		return span{}, next, false
	}
	scheme := strings.ToLower(s[j:w])
	if w < len(s) && (s[w] == ' ' || s[w] == '\t') {
		b := skipBlanks(s, w)
		w2 := runEnd(s, b, isHeaderNameByte, m)
		if paramSchemes[scheme] || !tokenSchemes[scheme] && w2 > b && w2 < len(s) && s[w2] == '=' {
			e := runEnd(s, b, func(c byte) bool { return c != '\n' && c != '\r' && (enclose == 0 || c != enclose) }, m)
			for e > b && (s[e-1] == ' ' || s[e-1] == '\t') {
				e--
			}
			if e == b || redactedAlready(s[b:e]) {
				return span{}, e, false
			}
			return span{b, e, "authorization"}, e, true
		}
		e := runEnd(s, b, isTokenByte, m)
		next = e
		tok := s[b:e]
		if e == b || !credentialLike(tok) || !tokenSchemes[scheme] && !lineEnd(s, e, enclose, m) {
			return span{}, next, false
		}
		return span{b, e, "authorization"}, next, true
	}
	// No scheme: the value is the credential.
	e := runEnd(s, j, isTokenByte, m)
	next = e
	if tok := s[j:e]; len(tok) >= 8 && credentialLike(tok) && lineEnd(s, e, enclose, m) {
		return span{j, e, "authorization"}, next, true
	}
	return span{}, next, false
}

// credentialLike reports whether an HTTP credential looks generated rather
// than written ("Bearer tokens are..."): it has a digit or a token
// punctuation mark, mixes upper and lower case, or is too long for a word.
func credentialLike(tok string) bool {
	return tokenLike(tok) || len(tok) >= 8 && random(tok)
}

// settingValue returns the span of a credential setting's value starting at
// s[i]: a quoted string's contents, or one word ending the line. YAML's
// empty values (null, true, |...), references ("${X}", "*alias") and
// placeholders are left alone.
func settingValue(s string, i int, kind string, enclose byte, q *quotes, m *meter) (sp span, next int, ok bool) {
	j := skipBlanks(s, i)
	next = j
	if j >= len(s) || redactedAt(s, j) {
		return span{}, next, false
	}
	if c := s[j]; (c == '"' || c == '\'') && c != enclose {
		k := q.end(j)
		if k < 0 {
			return span{}, next, false
		}
		next = k
		if k-1 == j+1 || templated(s[j+1:k-1]) {
			return span{}, next, false
		}
		return span{j + 1, k - 1, kind}, next, true
	}
	e := runEnd(s, j, func(c byte) bool { return !isSpace(c) && c != '"' && c != '\'' }, m)
	next = e
	v := s[j:e]
	if e == j || !lineEnd(s, e, enclose, m) || templated(v) || strings.IndexByte("|>&*#!", v[0]) >= 0 || emptySetting[strings.ToLower(v)] {
		return span{}, next, false
	}
	return span{j, e, kind}, next, true
}

// emptySetting are setting values that hold no secret.
var emptySetting = map[string]bool{"null": true, "~": true, "true": true, "false": true, "yes": true, "no": true,
	"none": true, "nil": true, "n/a": true, "na": true, "-": true, "required": true, "optional": true,
	"empty": true, "unset": true, "unknown": true, "redacted": true, "hidden": true}
