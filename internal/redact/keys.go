package redact

import "strings"

// findPrivateKeys returns the spans of PEM and PGP private key blocks in s:
// from a "-----BEGIN ... PRIVATE KEY-----" line (or "PRIVATE KEY BLOCK") to
// its "-----END ...-----" line, or to the end of s when the block is cut off.
func findPrivateKeys(s string, m *meter) []span {
	begins := newFinder(s, []string{"-----BEGIN"}, false, m)
	ends := newFinder(s, []string{"-----END"}, false, m)
	var out []span
	for i := 0; ; {
		at, _ := begins.find(i)
		if at < 0 {
			return out
		}
		h, ok := privateKeyLabel(s, at+len("-----BEGIN"), m)
		if !ok {
			i = at + 1
			continue
		}
		end := len(s) // cut off: the rest of s is the key
		for j := h; ; {
			e, _ := ends.find(j)
			if e < 0 {
				break
			}
			if k, ok := privateKeyLabel(s, e+len("-----END"), m); ok {
				end = k
				break
			}
			j = e + 1
		}
		out = append(out, span{at, end, "private_key"})
		i = end
	}
}

// privateKeyLabel reads the label after "-----BEGIN" or "-----END" at s[i:]:
// upper-case words ending in "PRIVATE KEY" or "PRIVATE KEY BLOCK", then
// "-----". It returns the index past the dashes.
func privateKeyLabel(s string, i int, m *meter) (int, bool) {
	e := runEnd(s, i, func(c byte) bool { return c >= 'A' && c <= 'Z' || isDigit(c) || c == ' ' }, m)
	label := s[i:e]
	if !strings.HasSuffix(label, "PRIVATE KEY") && !strings.HasSuffix(label, "PRIVATE KEY BLOCK") || !strings.HasPrefix(s[e:], "-----") {
		return 0, false
	}
	return e + len("-----"), true
}

// isTokenByte reports whether c may appear in an HTTP credential (RFC 6750's
// b64token).
func isTokenByte(c byte) bool { return isAlnum(c) || strings.IndexByte("._~+/=-", c) >= 0 }

// findBearer returns the spans of the tokens after "Bearer " (or "bearer",
// "BEARER") that tokenLike accepts.
func findBearer(s string, m *meter) []span {
	f := newFinder(s, []string{"Bearer", "bearer", "BEARER"}, false, m)
	var out []span
	for i := 0; ; {
		at, _ := f.find(i)
		if at < 0 {
			return out
		}
		i = at + len("bearer")
		if at > 0 && isWordByte(s[at-1]) {
			continue
		}
		b := runEnd(s, i, isSpace, m)
		if b == i {
			continue
		}
		e := runEnd(s, b, isTokenByte, m)
		if e-b >= 8 && tokenLike(s[b:e]) {
			out = append(out, span{b, e, "bearer_token"})
		}
		i = e
	}
}

// tokenLike reports whether the word after "Bearer" looks like a credential
// rather than prose ("bearer instruments"): it has a digit or a token
// punctuation mark, or is too long for a word.
func tokenLike(s string) bool {
	return len(s) >= 24 || strings.ContainsAny(s, "0123456789._~+/=-")
}
