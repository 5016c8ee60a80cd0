// Package redact replaces secrets in text before it is stored: API keys and
// access tokens of the common providers, JWTs, private keys (PEM and PGP),
// AWS secret keys, passwords inside URLs, Authorization headers, the values
// of credential fields ("password", "api_key", "token"...), passwords and
// PINs stated in prose ("my password is ...", "a minha senha é ...") and
// payment card numbers become typed placeholders such as "[redacted:card]".
//
// Every built-in rule is a single left-to-right pass over the text: the work
// grows linearly with its length whatever it holds (no rule rescans from
// each occurrence of a prefix, a digit run or a quote), which the tests check
// by counting the bytes each rule examines.
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

// placeholderPrefix starts every placeholder.
const placeholderPrefix = "[redacted:"

// span is where a secret is in a text, and the kind of its placeholder.
type span struct {
	start, end int
	kind       string
}

// rule is one kind of secret. find returns the spans of its secrets in s,
// in order and without overlaps; the built-in ones make one pass over s. m,
// when not nil, counts the bytes find examined.
type rule struct {
	name string
	find func(s string, m *meter) []span
}

// meter counts the bytes the rules examine, so tests can check that the work
// grows linearly with the input. A nil *meter counts nothing.
type meter struct{ n int }

// add counts k bytes examined.
func (m *meter) add(k int) {
	if m != nil {
		m.n += k
	}
}

// Redactor replaces secrets with typed placeholders. It is safe for
// concurrent use. A nil *Redactor redacts nothing, so redaction can be
// switched off by passing nil.
type Redactor struct {
	rules []rule
}

// builtin are the secret kinds every Redactor knows, most specific first so
// that a JWT behind "Bearer" is reported as a JWT, and a provider's key
// under a credential field keeps the provider's kind.
func builtin() []rule {
	return []rule{
		{name: "private_key", find: findPrivateKeys},
		{name: "token", find: findTokens},
		{name: "url_password", find: findURLPasswords},
		{name: "bearer_token", find: findBearer},
		{name: "header", find: findColonFields},
		{name: "aws_secret_key", find: findAWSSecrets},
		{name: "credential_field", find: findFields},
		{name: "prose", find: findProse},
		{name: "card", find: findCards},
	}
}

// New returns a Redactor with the built-in rules and the extra patterns
// (placeholder name → regular expression). A pattern with a submatch named
// "secret" redacts only that submatch. It fails on an invalid pattern or a
// name outside [A-Za-z0-9_.-].
//
// Go's regular expressions run in time linear in the text for each match,
// but a pattern whose matches need a long look ahead to fail (`a+b|a`) can
// cost more across all the matches of a long text: keep extra patterns
// anchored on a literal and bounded (`\bEMP-\d{6}\b`).
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
		r.rules = append(r.rules, rule{name: name, find: patternRule(name, re)})
	}
	return r, nil
}

// patternRule returns the find function of an extra pattern.
func patternRule(name string, re *regexp.Regexp) func(string, *meter) []span {
	group := max(re.SubexpIndex("secret"), 0)
	return func(s string, m *meter) []span {
		m.add(len(s))
		var out []span
		for _, loc := range re.FindAllStringSubmatchIndex(s, -1) {
			if start, end := loc[2*group], loc[2*group+1]; start >= 0 && end > start && !redactedAlready(s[start:end]) {
				out = append(out, span{start, end, name})
			}
		}
		return out
	}
}

// String returns s with every secret replaced by its placeholder, and how
// many secrets were replaced. A nil Redactor returns s unchanged.
func (r *Redactor) String(s string) (string, int) {
	return r.redact(s, nil)
}

// redact is String, counting the bytes examined in m.
func (r *Redactor) redact(s string, m *meter) (string, int) {
	if r == nil {
		return s, 0
	}
	total := 0
	for i := range r.rules {
		spans := r.rules[i].find(s, m)
		if len(spans) == 0 {
			continue
		}
		s = replaceSpans(s, spans, m)
		total += len(spans)
	}
	return s, total
}

// replaceSpans returns s with each span replaced by its placeholder.
func replaceSpans(s string, spans []span, m *meter) string {
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, sp := range spans {
		b.WriteString(s[last:sp.start])
		b.WriteString(placeholderPrefix)
		b.WriteString(sp.kind)
		b.WriteByte(']')
		last = sp.end
	}
	b.WriteString(s[last:])
	m.add(len(s))
	return b.String()
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

// redactedAt reports whether a placeholder starts at s[i].
func redactedAt(s string, i int) bool {
	return strings.HasPrefix(s[i:], placeholderPrefix)
}

// redactedAlready reports whether s is a placeholder.
func redactedAlready(s string) bool {
	return strings.HasPrefix(s, placeholderPrefix) && strings.HasSuffix(s, "]")
}
