package redact

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// pathological are inputs built to make a scanner rescan: long runs of one
// byte class, a token prefix repeated, digit groups, unclosed and escaped
// quotes, keys without values, nested JSON. Each makes about n bytes.
var pathological = []struct {
	name string
	text func(n int) string
}{
	{"jwt prefix repeated", rep("eyJ-")},
	{"jwt header repeated", rep("eyJhbGciOi.")},
	{"jwt without dots", func(n int) string { return "eyJ" + strings.Repeat("a", n) }},
	{"openai prefix repeated", rep("sk-")},
	{"stripe prefix repeated", rep("sk_live_")},
	{"aws id prefix repeated", rep("AKIA")},
	{"aws base64 run near context", func(n int) string { return "aws secret " + strings.Repeat("Ab1/", n/4) }},
	{"aws 40-byte runs near context", rep("aws " + strings.Repeat("Ab1/", 10) + " ")},
	{"github prefix repeated", rep("ghp_")},
	{"gitlab prefix repeated", rep("glpat-")},
	{"slack webhook repeated", rep("hooks.slack.com/services/")},
	{"twilio prefix repeated", rep("SK")},
	{"sendgrid prefix repeated", rep("SG.")},
	{"letters", rep("a")},
	{"upper case", rep("A")},
	{"digits", rep("4")},
	{"digit groups spaced", rep("1 ")},
	{"digit groups dashed", rep("4111-")},
	{"card groups", rep("4111 1111 ")},
	{"double quotes", rep(`"`)},
	{"escaped quotes", rep(`"\`)},
	{"single quote escapes", rep(`'\`)},
	{"unclosed quote then text", func(n int) string { return `"` + strings.Repeat("a ", n/2) }},
	{"quoted keys", rep(`"password":"`)},
	{"quoted keys escaped", rep(`"password":"\"`)},
	{"assignments", rep("password=")},
	{"assignments redacted", rep("password=[redacted:x]")},
	{"assignment without value", rep("password =")},
	{"pem begin repeated", rep("-----BEGIN ")},
	{"pem private header repeated", rep("-----BEGIN RSA PRIVATE KEY-----\n")},
	{"pem end without private", func(n int) string {
		return "-----BEGIN RSA PRIVATE KEY-----\n" + strings.Repeat("-----END PUBLIC KEY-----\n", n/25)
	}},
	{"bearer repeated", rep("bearer ")},
	{"bearer newlines", rep("Bearer\n")},
	{"url scheme repeated", rep("://")},
	{"url userinfo repeated", rep("a://a:b")},
	{"url long userinfo", func(n int) string { return "a://" + strings.Repeat("u:p", n/3) }},
	{"colons", rep(":")},
	{"name colons", rep("a:")},
	{"authorization repeated", rep("Authorization: ")},
	{"authorization lines", rep("\nAuthorization: Digest ")},
	{"authorization quoted", rep("'Authorization: '")},
	{"header quoted", rep("'X-Api-Key: '")},
	{"settings lines", rep("\npassword: \"")},
	{"prose nouns", rep("password ")},
	{"prose verbs", rep("my password is ")},
	{"prose phrase", rep("the password for the ")},
	{"prose colon", rep("password:")},
	{"prose portuguese", rep("a minha senha é ")},
	{"prose long value", func(n int) string { return "my password is " + strings.Repeat("x1", n/2) }},
	{"spaces", rep(" ")},
	{"newlines", rep("\n")},
	{"utf-8", rep("é")},
}

// rep returns a generator of unit repeated to about n bytes.
func rep(unit string) func(int) string {
	return func(n int) string { return strings.Repeat(unit, max(1, n/len(unit))) }
}

// work returns the bytes the default Redactor examines to redact s.
func work(tb testing.TB, r *Redactor, s string) int {
	tb.Helper()
	var m meter
	r.redact(s, &m)
	return m.n
}

// jsonWork returns the bytes the default Redactor examines to redact raw.
func jsonWork(tb testing.TB, r *Redactor, raw []byte) int {
	tb.Helper()
	var m meter
	if _, _, err := r.json(raw, 0, &m); err != nil {
		tb.Fatalf("json: %v", err)
	}
	return m.n
}

// perByte bounds the bytes examined per byte of input: every rule passes
// over the text once or a few times, and each placeholder rewrites it.
const perByte = 100

// assertLinear checks that work at 4n is about four times the work at n,
// and within perByte per input byte.
func assertLinear(t *testing.T, at func(n int) (size, work int)) {
	t.Helper()
	const n = 4 << 10
	s1, w1 := at(n)
	s4, w4 := at(4 * n)
	if w1 <= 0 || w4 <= 0 {
		t.Fatalf("no work counted: %d, %d", w1, w4)
	}
	ratio := float64(w4) / float64(w1)
	sizes := float64(s4) / float64(s1)
	if ratio > sizes*1.25 {
		t.Errorf("work grows faster than the input: %d bytes → %d, %d bytes → %d (×%.1f for ×%.1f)", s1, w1, s4, w4, ratio, sizes)
	}
	if w4 > perByte*s4 {
		t.Errorf("work %d for %d bytes: over %d per byte", w4, s4, perByte)
	}
}

func TestLinearWork(t *testing.T) {
	r := mustNew(t, nil)
	for _, p := range pathological {
		t.Run(p.name, func(t *testing.T) {
			assertLinear(t, func(n int) (int, int) {
				s := p.text(n)
				return len(s), work(t, r, s)
			})
		})
	}
}

// TestLinearWorkJSON runs the pathological texts as string values of a
// message, as keys, and nested as tool-call arguments, and adds deep JSON.
func TestLinearWorkJSON(t *testing.T) {
	r := mustNew(t, nil)
	enc := func(s string) string {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	shapes := map[string]func(string) string{
		"content": func(s string) string { return `{"role":"user","content":` + enc(s) + `}` },
		"key":     func(s string) string { return `{` + enc(s) + `:1}` },
		"arguments": func(s string) string {
			return `{"tool_calls":[{"function":{"arguments":` + enc(`{"q":`+enc(s)+`}`) + `}}]}`
		},
	}
	for shape, wrap := range shapes {
		for _, p := range pathological {
			t.Run(shape+"/"+p.name, func(t *testing.T) {
				assertLinear(t, func(n int) (int, int) {
					raw := []byte(wrap(p.text(n)))
					return len(raw), jsonWork(t, r, raw)
				})
			})
		}
	}
	deep := map[string]func(n int) string{
		"nested arrays":  func(n int) string { return strings.Repeat("[", n/2) + strings.Repeat("]", n/2) },
		"many strings":   func(n int) string { return "[" + strings.Repeat(`"password",`, n/11) + `""]` },
		"many keys":      func(n int) string { return "{" + strings.Repeat(`"password":1234,`, n/16) + `"x":0}` },
		"numbers":        func(n int) string { return "[" + strings.Repeat("4111111111111111,", n/17) + "0]" },
		"long number":    func(n int) string { return "[" + strings.Repeat("4", n) + "]" },
		"nested strings": nestedJSON,
	}
	for name, gen := range deep {
		t.Run("deep/"+name, func(t *testing.T) {
			assertLinear(t, func(n int) (int, int) {
				raw := []byte(gen(n))
				if !json.Valid(raw) {
					t.Fatalf("fixture is not JSON: %.80s", raw)
				}
				return len(raw), jsonWork(t, r, raw)
			})
		})
	}
}

// nestedJSON returns JSON strings holding JSON, many levels deep (deeper
// than maxNested), padded to about n bytes and more.
func nestedJSON(n int) string {
	s := `{"password":"x","pad":"` + strings.Repeat("a", n) + `"}`
	for range maxNested + 2 {
		b, _ := json.Marshal(s)
		s = `{"v":` + string(b) + `}`
	}
	return s
}

// TestIssueReproducerWork pins the case the review measured: 40 KB of
// "eyJ-" repeated cost 27–95 CPU-seconds. Its work is now a small multiple
// of its size.
func TestIssueReproducerWork(t *testing.T) {
	r := mustNew(t, nil)
	s := strings.Repeat("eyJ-", 10<<10)
	if w := work(t, r, s); w > perByte*len(s) {
		t.Fatalf("work %d for %d bytes", w, len(s))
	}
	if got, n := r.String(s); n != 0 || got != s {
		t.Fatalf("redacted %d secrets in eyJ- repeated", n)
	}
}

func BenchmarkPathological(b *testing.B) {
	r := mustNew(b, nil)
	for _, p := range pathological {
		for _, n := range []int{1 << 10, 16 << 10, 64 << 10} {
			s := p.text(n)
			b.Run(fmt.Sprintf("%s/%dKB", p.name, n>>10), func(b *testing.B) {
				b.SetBytes(int64(len(s)))
				for b.Loop() {
					r.String(s)
				}
			})
		}
	}
}
