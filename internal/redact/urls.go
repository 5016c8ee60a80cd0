package redact

import "strings"

// findURLPasswords returns the spans of the passwords in URLs' user info:
// "postgres://app:s3cret@db:5432/x", "https://user:token@git.example.com",
// "redis://:pass@cache". The user name and the host stay; a password that is
// a template ("${DB_PASSWORD}", "<password>", "****") is left alone.
func findURLPasswords(s string, m *meter) []span {
	f := newFinder(s, []string{"://"}, false, m)
	var out []span
	for i := 0; ; {
		at, _ := f.find(i)
		if at < 0 {
			return out
		}
		u := at + len("://")
		i = u
		if at == 0 || !isAlnum(s[at-1]) {
			continue // no scheme
		}
		e := runEnd(s, u, isUserinfoByte, m)
		i = e
		m.add(2 * (e - u))
		a := strings.LastIndexByte(s[u:e], '@')
		if a < 0 {
			continue
		}
		a += u
		c := strings.IndexByte(s[u:a], ':')
		if c < 0 {
			continue
		}
		c += u
		if pw := s[c+1 : a]; pw == "" || templated(pw) {
			continue
		}
		out = append(out, span{c + 1, a, "url_password"})
	}
}

// isUserinfoByte reports whether c may be part of a URL's authority as
// people write it: anything but white space, a path or query start, quotes
// and angle brackets ('#' stays: passwords hold it unencoded).
func isUserinfoByte(c byte) bool {
	return !isSpace(c) && strings.IndexByte("/?\"'<>`\\", c) < 0
}

// templated reports whether a value stands for a secret rather than being
// one: a variable ("$X", "${X}", "{{x}}", "%s"), a hole ("<password>"), a
// mask ("****") or a placeholder.
func templated(v string) bool {
	if v == "" || strings.Trim(v, "*x.•") == "" {
		return true
	}
	switch v[0] {
	case '$', '<', '{', '%', '[':
		return true
	}
	return false
}
