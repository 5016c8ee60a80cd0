// Package redact replaces secrets in text before it is stored: API keys,
// access tokens, JWTs, private keys (PEM and PGP), AWS secret keys, the
// values of credential fields ("password", "api_key", "token"...) and
// payment card numbers become typed placeholders such as "[redacted:card]".
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
	// anchors, when set, are the literals every match starts with: re (which
	// then begins with ^) is only tried where one occurs, at a word boundary.
	// Scanning for literals first keeps redaction fast on ordinary text.
	anchors []string
	// fold makes the anchors match regardless of ASCII case.
	fold bool
	// valid, when set, vets a match (the "secret" group if the pattern has
	// one); matches it rejects are left alone.
	valid func(string) bool
	// group is the index of the "secret" submatch, or 0 for the whole match.
	group int
	// scan, when set, replaces re: it returns the spans of the secrets in s.
	scan func(s string) [][2]int
	// scanKinds, when set, replaces re and name: it returns the spans of
	// the secrets in s with the placeholder kind of each.
	scanKinds func(s string) ([][2]int, []string)
}

// Redactor replaces secrets with typed placeholders. It is safe for
// concurrent use. A nil *Redactor redacts nothing, so redaction can be
// switched off by passing nil.
type Redactor struct {
	rules []rule
}

// builtin are the secret kinds every Redactor knows, most specific first so
// that a JWT behind "Bearer" is reported as a JWT.
func builtin() []rule {
	return []rule{
		{
			name:    "private_key",
			anchors: []string{"-----BEGIN"},
			// PEM keys, and PGP private key blocks ("... PRIVATE KEY BLOCK-----").
			re: regexp.MustCompile(`^-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*$)`),
		},
		{
			name:    "jwt",
			anchors: []string{"eyJ"},
			re:      regexp.MustCompile(`^eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`),
		},
		{
			name:    "openai_key",
			anchors: []string{"sk-"},
			re:      regexp.MustCompile(`^sk-(?:proj-|svcacct-|admin-|ant-)?[A-Za-z0-9_-]{20,}`),
		},
		{
			name:    "aws_access_key",
			anchors: []string{"AKIA", "ASIA", "AGPA", "AIDA", "AROA"},
			re:      regexp.MustCompile(`^[A-Z]{4}[0-9A-Z]{16}\b`),
		},
		{
			name:    "github_token",
			anchors: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"},
			re:      regexp.MustCompile(`^(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})`),
		},
		{
			name:    "slack_token",
			anchors: []string{"xox"},
			re:      regexp.MustCompile(`^xox[abprs]-[A-Za-z0-9-]{10,}`),
		},
		{
			name:    "bearer_token",
			anchors: []string{"bearer"},
			fold:    true,
			re:      regexp.MustCompile(`^(?i)bearer\s+(?P<secret>[A-Za-z0-9._~+/=-]{8,})`),
			valid:   tokenLike,
			group:   1,
		},
		{name: "aws_secret_key", scan: findAWSSecrets},
		{name: "credential_field", scanKinds: findFields},
		{name: "card", scan: findCards},
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
// many secrets were replaced. A nil Redactor returns s unchanged.
func (r *Redactor) String(s string) (string, int) {
	if r == nil {
		return s, 0
	}
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
	var spans [][2]int
	var kinds []string
	if ru.scanKinds != nil {
		spans, kinds = ru.scanKinds(s)
	} else {
		spans = ru.spans(s)
	}
	if len(spans) == 0 {
		return s, 0
	}
	var b strings.Builder
	last, n := 0, 0
	for i, sp := range spans {
		start, end := sp[0], sp[1]
		if n == 0 {
			b.Grow(len(s))
		}
		b.WriteString(s[last:start])
		if kinds != nil {
			b.WriteString(Placeholder(kinds[i]))
		} else {
			b.WriteString(Placeholder(ru.name))
		}
		last = end
		n++
	}
	if n == 0 {
		return s, 0
	}
	b.WriteString(s[last:])
	return b.String(), n
}

// spans returns where the rule's secrets are in s, in order.
func (ru *rule) spans(s string) [][2]int {
	if ru.scan != nil {
		return ru.scan(s)
	}
	if len(ru.anchors) > 0 {
		return ru.anchoredSpans(s)
	}
	var out [][2]int
	for _, loc := range ru.re.FindAllStringSubmatchIndex(s, -1) {
		if sp, ok := ru.secret(s, 0, loc); ok {
			out = append(out, sp)
		}
	}
	return out
}

// anchoredSpans tries the anchored regexp at every occurrence of an anchor
// that starts a word, left to right, without overlaps.
func (ru *rule) anchoredSpans(s string) [][2]int {
	var out [][2]int
	for i := 0; i < len(s); {
		at := -1
		for _, a := range ru.anchors {
			if k := index(s[i:], a, ru.fold); k >= 0 && (at < 0 || i+k < at) {
				at = i + k
			}
		}
		if at < 0 {
			break
		}
		i = at + 1
		if at > 0 && isWordByte(s[at-1]) {
			continue
		}
		loc := ru.re.FindStringSubmatchIndex(s[at:])
		if loc == nil {
			continue
		}
		if sp, ok := ru.secret(s, at, loc); ok {
			out = append(out, sp)
			i = sp[1]
		}
	}
	return out
}

// secret returns the span of the secret in a match loc of s[off:], if the
// rule's validator accepts it.
func (ru *rule) secret(s string, off int, loc []int) ([2]int, bool) {
	start, end := loc[2*ru.group], loc[2*ru.group+1]
	if start < 0 {
		return [2]int{}, false
	}
	start, end = start+off, end+off
	if ru.valid != nil && !ru.valid(s[start:end]) {
		return [2]int{}, false
	}
	return [2]int{start, end}, true
}

// index returns the first index of sub in s, ignoring ASCII case when fold
// is set (sub is then lowercase), or -1.
func index(s, sub string, fold bool) int {
	if !fold {
		return strings.Index(s, sub)
	}
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i]|0x20 == sub[0] && strings.EqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}

// tokenLike reports whether the word after "Bearer" looks like a credential
// rather than prose ("bearer instruments"): it has a digit or a token
// punctuation mark, or is too long for a word.
func tokenLike(s string) bool {
	return len(s) >= 24 || strings.ContainsAny(s, "0123456789._~+/=-")
}

// Message returns m with its Content and every string value of its Raw JSON
// redacted, and how many secrets were replaced (counted in Raw when the
// message has one, since Content is derived from it). Raw stays valid JSON.
func (r *Redactor) Message(m memory.Message) (memory.Message, int, error) {
	var n int
	m.Content, n = r.String(m.Content)
	if len(m.Raw) > 0 {
		raw, k, err := r.JSON(m.Raw)
		if err != nil {
			return memory.Message{}, 0, fmt.Errorf("redact message: %w", err)
		}
		m.Raw = raw
		n = k // Content is a projection of Raw: count its secrets once
	}
	return m, n, nil
}
