package redact

import "strings"

// Credential fields: values stored under a key that names a credential
// ("password", "client_secret", "apiKey", "X-Api-Key", "refresh_token",
// "cvv") are secrets whatever they look like. JSON does this for real JSON
// (messages' Raw, tool-call arguments that are themselves JSON); the rules
// below do it in text (a JSON or Python snippet pasted into a message, the
// "[tool_call name(arguments)]" lines of Content, KEY=value lines of an env
// file).

// fieldKind returns the placeholder kind for the value of a key that names
// a credential, or "" for an ordinary key. Keys are compared lower-cased
// without separators, by suffix, so "db_password", "clientSecret" and
// "x-api-key" count; "max_tokens", "token_type" or "secretary" do not.
func fieldKind(key string) string {
	if len(key) == 0 || len(key) > 64 {
		return ""
	}
	var b [64]byte
	k := b[:0]
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c >= 'A' && c <= 'Z':
			k = append(k, c+'a'-'A')
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
			k = append(k, c)
		case c == '_' || c == '-' || c == '.' || c == ' ':
		default:
			return "" // not an identifier-like key
		}
	}
	s := string(k)
	switch s {
	case "cvv", "cvc", "cvv2", "cvc2", "securitycode", "cardsecuritycode", "cardcvv", "cardcvc":
		return "card_cvv"
	case "pwd", "auth", "authorization", "proxyauthorization", "bearer", "sig":
		if s == "pwd" {
			return "password"
		}
		return "token"
	}
	for _, f := range credentialSuffixes {
		if strings.HasSuffix(s, f.suffix) {
			return f.kind
		}
	}
	return ""
}

// credentialSuffixes map the ends of normalised key names to their kind.
var credentialSuffixes = []struct{ suffix, kind string }{
	{"password", "password"},
	{"passwd", "password"},
	{"passphrase", "password"},
	{"userpwd", "password"},
	{"apikey", "api_key"},
	{"apikeys", "api_key"},
	{"secretaccesskey", "secret"},
	{"secretkey", "secret"},
	{"privatekey", "secret"},
	{"signingkey", "secret"},
	{"encryptionkey", "secret"},
	{"secret", "secret"},
	{"token", "token"},
	{"sessionid", "token"},
	{"credentials", "secret"},
	{"accountkey", "secret"},
	{"sharedaccesskey", "secret"},
	{"masterkey", "secret"},
	{"clientkey", "secret"},
	{"accesskey", "secret"},
}

// findFields returns the spans, with their kinds, of the values of
// credential fields in text: quoted keys that fieldKind names —
// `"password": "hunter2"`, `'api_key': 'x'`, `"cvv": 123` — and unquoted
// KEY=value assignments (`DB_PASSWORD=x`, `api_key = x`, `?access_token=x&`,
// `;AccountKey=x;`). A value that is a placeholder already is left alone.
func findFields(s string, m *meter) []span {
	var out []span
	q := &quotes{s: s, m: m, from: [2]int{-1, -1}, to: [2]int{-1, -1}}
	for i := 0; i < len(s); {
		key, start, end, quoted := nextKey(s, i, q)
		if end < 0 {
			break
		}
		// A quoted string that is no credential key may hold one (a
		// snippet in a sentence): go on inside it.
		i = end
		if quoted {
			i = start + 1
		}
		kind := fieldKind(key)
		if kind == "" {
			continue
		}
		if sp, ok := fieldValue(s, end, quoted, q); ok && !redactedAlready(s[sp[0]:sp[1]]) {
			out = append(out, span{sp[0], sp[1], kind})
			i = sp[1]
		}
	}
	return out
}

// nextKey finds the next candidate key at or after i: a quoted string, or a
// bare identifier-like word followed by '='. It returns the key, where it
// starts and the index just past it, and whether it was quoted; end is -1
// when there is none.
func nextKey(s string, i int, q *quotes) (key string, start, end int, quoted bool) {
	from := i
	defer func() { q.m.add(max(end, i) - from) }()
	for ; i < len(s); i++ {
		c := s[i]
		if c == '"' || c == '\'' {
			j := q.end(i)
			if j < 0 {
				continue
			}
			return s[i+1 : j-1], i, j, true
		}
		if isWordByte(c) && (i == 0 || !isWordByte(s[i-1]) && s[i-1] != '-' && s[i-1] != '.') {
			j := i
			for j < len(s) && (isWordByte(s[j]) || s[j] == '-' || s[j] == '.') {
				j++
			}
			k := skipBlanks(s, j)
			if k < len(s) && s[k] == '=' && (k+1 >= len(s) || s[k+1] != '=') {
				return s[i:j], i, j, false
			}
			i = j - 1
		}
	}
	return "", -1, -1, false
}

// quotes finds where quoted strings end: at the next same quote, or at the
// end of the line (unclosed), skipping a byte after each backslash. Which
// bytes end a string does not depend on where it opened (a run of
// backslashes parses the same from any opening quote before it), so the end
// found for one opening quote serves every later one before that end: each
// byte is scanned once however many quotes a line holds.
type quotes struct {
	s string
	m *meter
	// For '"' (0) and '\'' (1): no string of that quote ends within
	// (from, to), and to is where one ends: the quote or newline there, or
	// len(s).
	from, to [2]int
}

// end returns the index just past the string quoted by s[start] (with
// backslash escapes), or -1 when it is not closed on this line.
func (q *quotes) end(start int) int {
	s, c, k := q.s, q.s[start], 0
	if c == '\'' {
		k = 1
	}
	if start < q.from[k] || start >= q.to[k] {
		t := start + 1
		for ; t < len(s) && s[t] != c && s[t] != '\n'; t++ {
			if s[t] == '\\' {
				t++
			}
		}
		t = min(t, len(s))
		q.m.add(t - start)
		q.from[k], q.to[k] = start, t
	}
	if t := q.to[k]; t < len(s) && s[t] == c {
		return t + 1
	}
	return -1
}

// fieldValue returns the span of the value after a key ending at end: after
// ':' (quoted keys) or '=' (both), a quoted string's contents or a bare run
// up to a space, quote, comma or closing bracket.
func fieldValue(s string, end int, quoted bool, q *quotes) ([2]int, bool) {
	j := skipBlanks(s, end)
	if j >= len(s) || !(s[j] == '=' || quoted && s[j] == ':') {
		return [2]int{}, false
	}
	j = skipBlanks(s, j+1)
	if j >= len(s) || redactedAt(s, j) {
		return [2]int{}, false
	}
	if s[j] == '"' || s[j] == '\'' {
		k := q.end(j)
		if k < 0 || !credentialValue(s[j+1:k-1]) {
			return [2]int{}, false
		}
		return [2]int{j + 1, k - 1}, true
	}
	if quoted && !(isDigit(s[j]) || s[j] == '-') {
		return [2]int{}, false // `"password": null`, an object, true/false
	}
	k := runEnd(s, j, isBareValueByte, q.m)
	if k == j || !quoted && !bareValue(s, end, j, k) {
		return [2]int{}, false
	}
	return [2]int{j, k}, true
}

// bareValue reports whether s[j:k], the unquoted value of the unquoted key
// ending at end, is a value rather than code or a template: not a call
// ("getpass()", "os.environ[...]"), a variable ("$X", "${X}", "$(cmd)",
// "api_key", "settings.SECRET_KEY"), a null or a boolean;
// and, when blanks surround the '=' ("password = x", as in code), the key
// starts its line and the value ends it (an INI file).
func bareValue(s string, end, j, k int) bool {
	v := s[j:k]
	if !credentialValue(v) || strings.ContainsAny(v, "([") || emptySetting[strings.ToLower(v)] || v == "undefined" ||
		fieldKind(v) != "" || codeName(v) {
		return false
	}
	if j > 0 && (s[j-1] == ' ' || s[j-1] == '\t') {
		start := end
		for start > 0 && (isWordByte(s[start-1]) || s[start-1] == '-' || s[start-1] == '.') {
			start--
		}
		if lineStart, _ := fieldContext(s, start, nil); !lineStart || !lineEnd(s, k, 0, nil) {
			return false
		}
	}
	return true
}

// isBareValueByte reports whether c continues an unquoted value.
func isBareValueByte(c byte) bool { return strings.IndexByte(" \t\r\n\"',;}]&)", c) < 0 }

// credentialValue reports whether v, found where a credential goes, may be
// one: not empty, a placeholder, a template ("${X}", "<token>", "****") or
// an Authorization scheme alone ("Bearer ", the token being added in code).
func credentialValue(v string) bool {
	if v == "" || redactedAlready(v) || templated(v) {
		return false
	}
	if w := strings.ToLower(strings.TrimSpace(v)); tokenSchemes[w] || paramSchemes[w] {
		return false
	}
	return true
}

// codeName reports whether v is a name in code rather than a value: words
// of letters and underscores joined by dots ("settings.SECRET_KEY",
// "self.token").
func codeName(v string) bool {
	if strings.IndexByte(v, '.') <= 0 || v[len(v)-1] == '.' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !isLetter(c) && c != '_' && c != '.' {
			return false
		}
	}
	return !strings.Contains(v, "..")
}

func skipBlanks(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}
