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
	case "pwd", "auth", "authorization", "bearer":
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
}

// redactedAlready reports whether s is a placeholder.
func redactedAlready(s string) bool {
	return strings.HasPrefix(s, "[redacted:") && strings.HasSuffix(s, "]")
}

// findFields returns the spans, and kinds, of the values of credential
// fields in text: quoted keys that fieldKind names — `"password": "hunter2"`,
// `'api_key': 'x'`, `"cvv": 123` — and unquoted KEY=value assignments
// (`DB_PASSWORD=x`, `api_key = x`, `?access_token=x&`). A value that is a
// placeholder already is left alone.
func findFields(s string) ([][2]int, []string) {
	var spans [][2]int
	var kinds []string
	for i := 0; i < len(s); {
		key, start, end, quoted := nextKey(s, i)
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
		if sp, ok := fieldValue(s, end, quoted); ok && !redactedAlready(s[sp[0]:sp[1]]) {
			spans = append(spans, sp)
			kinds = append(kinds, kind)
			i = sp[1]
		}
	}
	return spans, kinds
}

// nextKey finds the next candidate key at or after i: a quoted string, or a
// bare identifier-like word followed by '='. It returns the key, where it
// starts and the index just past it, and whether it was quoted; end is -1
// when there is none.
func nextKey(s string, i int) (key string, start, end int, quoted bool) {
	for ; i < len(s); i++ {
		c := s[i]
		if c == '"' || c == '\'' {
			j := quotedEnd(s, i)
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
			k := j
			for k < len(s) && (s[k] == ' ' || s[k] == '\t') {
				k++
			}
			if k < len(s) && s[k] == '=' && (k+1 >= len(s) || s[k+1] != '=') {
				return s[i:j], i, j, false
			}
			i = j - 1
		}
	}
	return "", -1, -1, false
}

// quotedEnd returns the index just past the string quoted by s[start] (with
// backslash escapes), or -1 when it is not closed on this line.
func quotedEnd(s string, start int) int {
	q := s[start]
	for j := start + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '\n':
			return -1
		case q:
			return j + 1
		}
	}
	return -1
}

// fieldValue returns the span of the value after a key ending at end: after
// ':' (quoted keys) or '=' (both), a quoted string's contents or a bare run
// up to a space, quote, comma or closing bracket.
func fieldValue(s string, end int, quoted bool) ([2]int, bool) {
	j := skipBlanks(s, end)
	if j >= len(s) || !(s[j] == '=' || quoted && s[j] == ':') {
		return [2]int{}, false
	}
	j = skipBlanks(s, j+1)
	if j >= len(s) {
		return [2]int{}, false
	}
	if s[j] == '"' || s[j] == '\'' {
		k := quotedEnd(s, j)
		if k < 0 || k-1 == j+1 {
			return [2]int{}, false
		}
		return [2]int{j + 1, k - 1}, true
	}
	if quoted && !(isDigit(s[j]) || s[j] == '-') {
		return [2]int{}, false // `"password": null`, an object, true/false
	}
	k := j
	for k < len(s) && !strings.ContainsRune(" \t\r\n\"',;}]&)", rune(s[k])) {
		k++
	}
	if k == j || strings.HasPrefix(s[j:k], "[redacted:") {
		return [2]int{}, false
	}
	return [2]int{j, k}, true
}

func skipBlanks(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}
