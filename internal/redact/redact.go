// Package redact replaces secrets in text before it is stored: API keys,
// access tokens, JWTs, private keys and payment card numbers become typed
// placeholders such as "[redacted:card]".
package redact

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/memgate/memgate/internal/memory"
)

// Placeholder returns the text that replaces a secret of the named kind.
func Placeholder(kind string) string { return "[redacted:" + kind + "]" }

// rule is one kind of secret.
type rule struct {
	name string
	re   *regexp.Regexp
	// maybe is a cheap test that rules the pattern out on most text; nil
	// means always try the regexp.
	maybe func(string) bool
	// valid, when set, vets a match (the "secret" group if the pattern has
	// one); matches it rejects are left alone.
	valid func(string) bool
	// group is the index of the "secret" submatch, or 0 for the whole match.
	group int
}

// Redactor replaces secrets with typed placeholders. It is safe for
// concurrent use.
type Redactor struct {
	rules []rule
}

// builtin are the secret kinds every Redactor knows, most specific first so
// that a JWT behind "Bearer" is reported as a JWT.
func builtin() []rule {
	return []rule{
		{
			name:  "private_key",
			re:    regexp.MustCompile(`-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?:[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY-----|[\s\S]*$)`),
			maybe: func(s string) bool { return strings.Contains(s, "PRIVATE KEY-----") },
		},
		{
			name:  "jwt",
			re:    regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`),
			maybe: func(s string) bool { return strings.Contains(s, "eyJ") },
		},
		{
			name:  "openai_key",
			re:    regexp.MustCompile(`\bsk-(?:proj-|svcacct-|admin-|ant-)?[A-Za-z0-9_-]{20,}`),
			maybe: func(s string) bool { return strings.Contains(s, "sk-") },
		},
		{
			name: "aws_access_key",
			re:   regexp.MustCompile(`\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b`),
			maybe: func(s string) bool {
				return strings.Contains(s, "AKIA") || strings.Contains(s, "ASIA") || strings.Contains(s, "AGPA") ||
					strings.Contains(s, "AIDA") || strings.Contains(s, "AROA")
			},
		},
		{
			name:  "github_token",
			re:    regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})`),
			maybe: func(s string) bool { return strings.Contains(s, "gh") || strings.Contains(s, "github_pat_") },
		},
		{
			name:  "slack_token",
			re:    regexp.MustCompile(`\bxox[abprs]-[A-Za-z0-9-]{10,}`),
			maybe: func(s string) bool { return strings.Contains(s, "xox") },
		},
		{
			name:  "bearer_token",
			re:    regexp.MustCompile(`(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/=-]{8,})`),
			maybe: func(s string) bool { return containsFold(s, "bearer") },
			valid: tokenLike,
			group: 1,
		},
		{
			name:  "card",
			re:    regexp.MustCompile(`\b\d(?:[ -]?\d){11,18}\b`),
			maybe: func(s string) bool { return countDigits(s) >= 13 },
			valid: cardNumber,
		},
	}
}

// New returns a Redactor with the built-in rules and the extra patterns
// (placeholder name → regular expression). A pattern with a submatch named
// "secret" redacts only that submatch. It fails on an invalid pattern or a
// name outside [A-Za-z0-9_.-].
func New(extra map[string]string) (*Redactor, error) {
	r := &Redactor{rules: builtin()}
	names := make([]string, 0, len(extra))
	for name := range extra {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if name == "" || strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != "" {
			return nil, fmt.Errorf("redact pattern %q: %w: name must be [A-Za-z0-9_.-]+", name, memory.ErrInvalid)
		}
		re, err := regexp.Compile(extra[name])
		if err != nil {
			return nil, fmt.Errorf("redact pattern %q: %w: %v", name, memory.ErrInvalid, err)
		}
		if re.MatchString("") {
			return nil, fmt.Errorf("redact pattern %q: %w: matches the empty string", name, memory.ErrInvalid)
		}
		r.rules = append(r.rules, rule{name: name, re: re, group: max(re.SubexpIndex("secret"), 0)})
	}
	return r, nil
}

// String returns s with every secret replaced by its placeholder, and how
// many secrets were replaced.
func (r *Redactor) String(s string) (string, int) {
	total := 0
	for i := range r.rules {
		var n int
		s, n = r.rules[i].apply(s)
		total += n
	}
	return s, total
}

// apply redacts one kind of secret in s.
func (ru *rule) apply(s string) (string, int) {
	if ru.maybe != nil && !ru.maybe(s) {
		return s, 0
	}
	locs := ru.re.FindAllStringSubmatchIndex(s, -1)
	if len(locs) == 0 {
		return s, 0
	}
	var b strings.Builder
	last, n := 0, 0
	for _, loc := range locs {
		start, end := loc[2*ru.group], loc[2*ru.group+1]
		if start < 0 || (ru.valid != nil && !ru.valid(s[start:end])) {
			continue
		}
		if n == 0 {
			b.Grow(len(s))
		}
		b.WriteString(s[last:start])
		b.WriteString(Placeholder(ru.name))
		last = end
		n++
	}
	if n == 0 {
		return s, 0
	}
	b.WriteString(s[last:])
	return b.String(), n
}

// tokenLike reports whether the word after "Bearer" looks like a credential
// rather than prose ("bearer instruments"): it has a digit or a token
// punctuation mark, or is too long for a word.
func tokenLike(s string) bool {
	return len(s) >= 24 || strings.ContainsAny(s, "0123456789._~+/=-")
}

// containsFold reports whether s contains the ASCII-lowercase word sub,
// ignoring ASCII case.
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i]|0x20 == sub[0] && strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// countDigits counts the ASCII digits in s.
func countDigits(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			n++
		}
	}
	return n
}

// Message returns m with its Content and every string value of its Raw JSON
// redacted, and how many secrets were replaced. Raw stays valid JSON.
func (r *Redactor) Message(m memory.Message) (memory.Message, int, error) {
	var n int
	m.Content, n = r.String(m.Content)
	if len(m.Raw) > 0 {
		raw, k, err := r.JSON(m.Raw)
		if err != nil {
			return memory.Message{}, 0, fmt.Errorf("redact message: %w", err)
		}
		m.Raw = raw
		n += k
	}
	return m, n, nil
}
