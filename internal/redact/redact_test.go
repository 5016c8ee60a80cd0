package redact

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

func mustNew(tb testing.TB, extra map[string]string) *Redactor {
	tb.Helper()
	r, err := New(extra)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return r
}

// Fake secrets, assembled so that no scanner mistakes this file for a leak.
var (
	openaiKey  = "sk-" + "proj-" + strings.Repeat("Ab3_", 12)
	legacyKey  = "sk-" + strings.Repeat("x9Y", 16)
	awsKey     = "AKIA" + "IOSFODNN7EXAMPLE"
	ghToken    = "ghp_" + strings.Repeat("a1B2", 9)
	ghPAT      = "github_pat_" + strings.Repeat("11AB_cd", 6)
	slackToken = "xoxb-" + "123456789012-abcdefABCDEF"
	jwt        = "eyJhbGciOiJIUzI1NiJ9" + "." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0" + "." + "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	pemKey     = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nabc+/=\n-----END RSA PRIVATE KEY-----"
)

func TestString(t *testing.T) {
	runStringCases(t, []redactCase{
		{"openai project key", "my key is " + openaiKey + ", thanks", "my key is [redacted:openai_key], thanks", 1},
		{"openai legacy key", "OPENAI_API_KEY=" + legacyKey, "OPENAI_API_KEY=[redacted:openai_key]", 1},
		{"aws", "aws_access_key_id = " + awsKey, "aws_access_key_id = [redacted:aws_access_key]", 1},
		{"github classic", "token " + ghToken + " expired", "token [redacted:github_token] expired", 1},
		{"github pat", ghPAT, "[redacted:github_token]", 1},
		{"slack", "SLACK=" + slackToken, "SLACK=[redacted:slack_token]", 1},
		{"jwt", "cookie: session=" + jwt + ";", "cookie: session=[redacted:jwt];", 1},
		{"bearer jwt reported as jwt", "Authorization: Bearer " + jwt, "Authorization: Bearer [redacted:jwt]", 1},
		{"bearer opaque", "curl -H 'Authorization: bearer abc123def456ghi'", "curl -H 'Authorization: bearer [redacted:bearer_token]'", 1},
		{"pem block", "here:\n" + pemKey + "\ndone", "here:\n[redacted:private_key]\ndone", 1},
		{"pem truncated", "oops -----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk", "oops [redacted:private_key]", 1},
		{"visa spaced", "card 4111 1111 1111 1111 exp 12/27", "card [redacted:card] exp 12/27", 1},
		{"visa dashed", "4012-8888-8888-1881", "[redacted:card]", 1},
		{"mastercard plain", "pay with 5500000000000004.", "pay with [redacted:card].", 1},
		{"amex grouped", "amex 3782 822463 10005", "amex [redacted:card]", 1},
		{"two secrets", awsKey + " and 4111111111111111", "[redacted:aws_access_key] and [redacted:card]", 2},
		// False positives that must survive.
		{"non-luhn card-like", "order 4111 1111 1111 1112", "order 4111 1111 1111 1112", 0},
		{"brazilian amount", "custa R$ 5.000,00 por mês", "custa R$ 5.000,00 por mês", 0},
		{"phone e164", "ligue +55 11 99999-9999 ou +1 (415) 555-2671", "ligue +55 11 99999-9999 ou +1 (415) 555-2671", 0},
		{"phone digits", "whatsapp 5511999999999", "whatsapp 5511999999999", 0},
		{"mixed separators", "4111-1111 1111-1111", "4111-1111 1111-1111", 0},
		{"odd grouping", "411 1111 1111 11111", "411 1111 1111 11111", 0},
		{"too many digits", "id 41111111111111111111111", "id 41111111111111111111111", 0},
		{"timestamp", "at 1732243200123 ms", "at 1732243200123 ms", 0},
		{"bearer prose", "the bearer instrument is payable", "the bearer instrument is payable", 0},
		{"sk prefix word", "task-force and sk-short", "task-force and sk-short", 0},
		{"eyJ word", "eyJ is how base64 JSON starts", "eyJ is how base64 JSON starts", 0},
		{"plain text", "Meu nome é Ana e moro em Lisboa.", "Meu nome é Ana e moro em Lisboa.", 0},
		{"public key", "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----", "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----", 0},
		{"uuid", "id 123e4567-e89b-12d3-a456-426614174000", "id 123e4567-e89b-12d3-a456-426614174000", 0},
	})
}

// redactCase is one input of a table test and its redaction: the result and
// the number of secrets removed.
type redactCase struct {
	name string
	in   string
	want string
	n    int
}

// runStringCases checks the default Redactor's String on each case.
func runStringCases(t *testing.T, tests []redactCase) {
	t.Helper()
	r := mustNew(t, nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, n := r.String(tc.in)
			if got != tc.want || n != tc.n {
				t.Fatalf("String(%q)\n got  %q (%d)\n want %q (%d)", tc.in, got, n, tc.want, tc.n)
			}
		})
	}
}

// runJSONCases checks the default Redactor's JSON on each case: the result
// is valid JSON equal to want, and an input with nothing to redact comes
// back byte for byte.
func runJSONCases(t *testing.T, tests []redactCase) {
	t.Helper()
	r := mustNew(t, nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, n, err := r.JSON([]byte(tc.in))
			if err != nil {
				t.Fatalf("JSON: %v", err)
			}
			if !json.Valid(got) {
				t.Fatalf("result is not valid JSON: %s", got)
			}
			if n != tc.n || !jsonSame(t, got, []byte(tc.want)) {
				t.Fatalf("JSON(%s)\n got  %s (%d)\n want %s (%d)", tc.in, got, n, tc.want, tc.n)
			}
			if tc.n == 0 && string(got) != tc.in {
				t.Fatalf("unchanged input was re-encoded: %s", got)
			}
		})
	}
}

func TestExtraPatterns(t *testing.T) {
	r := mustNew(t, map[string]string{
		"employee_id": `\bEMP-\d{6}\b`,
		"password":    `(?i)password[:=]\s*(?P<secret>\S+)`,
	})
	got, n := r.String("EMP-123456 set password: hunter22 and EMP-12")
	want := "[redacted:employee_id] set password: [redacted:password] and EMP-12"
	if got != want || n != 2 {
		t.Fatalf("got %q (%d), want %q", got, n, want)
	}
}

func TestNewRejects(t *testing.T) {
	for name, extra := range map[string]map[string]string{
		"bad regexp":    {"x": `(`},
		"empty match":   {"x": `a*`},
		"bad name":      {"has space": `abc`},
		"empty name":    {"": `abc`},
		"brackets name": {"x]": `abc`},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := New(extra); !errors.Is(err, memory.ErrInvalid) {
				t.Fatalf("New = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestJSON(t *testing.T) {
	r := mustNew(t, nil)
	runJSONCases(t, []redactCase{
		{
			name: "content and key untouched",
			in:   `{"role":"user","content":"use ` + awsKey + ` please"}`,
			want: `{"role":"user","content":"use [redacted:aws_access_key] please"}`,
			n:    1,
		},
		{
			name: "tool call arguments (escaped JSON in a string)",
			in:   `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"pay","arguments":"{\"card\":\"4111 1111 1111 1111\",\"cvv\":\"123\"}"}}]}`,
			want: `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"pay","arguments":"{\"card\":\"[redacted:card]\",\"cvv\":\"[redacted:card_cvv]\"}"}}]}`,
			n:    2,
		},
		{
			name: "content parts and escaped newlines in a PEM",
			in:   `{"role":"user","content":[{"type":"text","text":` + quoteTest(pemKey+"\nis my key") + `},{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}`,
			want: `{"role":"user","content":[{"type":"text","text":"[redacted:private_key]\nis my key"},{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}`,
			n:    1,
		},
		{
			name: "ordinary key names and numbers are kept",
			in:   `{"aws_region": "eu-west-1", "n": 4111111111111112, "max_tokens": 4096}`,
			want: `{"aws_region": "eu-west-1", "n": 4111111111111112, "max_tokens": 4096}`,
		},
		{
			name: "formatting kept",
			in:   "{\n  \"content\" : \"Bearer " + legacyKey + "\",\n  \"x\": 1.50\n}",
			want: "{\n  \"content\" : \"Bearer [redacted:openai_key]\",\n  \"x\": 1.50\n}",
			n:    1,
		},
		{
			name: "unicode and html characters survive",
			in:   `{"content":"olá <b>&</b> \u00e9 ` + ghToken + `"}`,
			want: `{"content":"olá <b>&</b> é [redacted:github_token]"}`,
			n:    1,
		},
		{
			name: "nothing to do",
			in:   `{"role":"user","content":"hello \"world\""}`,
			want: `{"role":"user","content":"hello \"world\""}`,
		},
	})
	if _, _, err := r.JSON([]byte(`{"a":`)); !errors.Is(err, memory.ErrInvalid) {
		t.Fatalf("invalid JSON: err = %v, want ErrInvalid", err)
	}
}

func TestMessage(t *testing.T) {
	r := mustNew(t, nil)
	raw := json.RawMessage(`{"role":"user","content":"key ` + openaiKey + `"}`)
	m, err := memory.ParseMessage(raw)
	if err != nil {
		t.Fatal(err)
	}
	got, n, err := r.Message(m)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || got.Content != "key [redacted:openai_key]" || strings.Contains(string(got.Raw), openaiKey) {
		t.Fatalf("Message = %q %s (%d)", got.Content, got.Raw, n)
	}
	if string(m.Raw) != string(raw) {
		t.Fatal("Message modified its argument's Raw")
	}
}

func TestNilRedactor(t *testing.T) {
	var r *Redactor
	m := memory.Message{Role: "user", Content: awsKey, Raw: json.RawMessage(`{"role":"user","content":"` + awsKey + `"}`)}
	got, n, err := r.Message(m)
	if err != nil || n != 0 || got.Content != awsKey || string(got.Raw) != string(m.Raw) {
		t.Fatalf("nil Redactor changed the message: %+v %d %v", got, n, err)
	}
}

func quoteTest(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func jsonSame(tb testing.TB, a, b []byte) bool {
	tb.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		tb.Fatalf("unmarshal %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		tb.Fatalf("unmarshal %s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

var benchText = strings.Repeat("The quarterly report is attached; revenue grew 12% to R$ 5.000.000 and call me at +55 11 99999-9999. ", 20)

func BenchmarkStringClean(b *testing.B) {
	r := mustNew(b, nil)
	b.SetBytes(int64(len(benchText)))
	for b.Loop() {
		r.String(benchText)
	}
}

func BenchmarkStringSecrets(b *testing.B) {
	r := mustNew(b, nil)
	s := benchText + " key " + openaiKey + " card 4111 1111 1111 1111 Bearer " + jwt
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		r.String(s)
	}
}

func BenchmarkJSONToolCall(b *testing.B) {
	r := mustNew(b, nil)
	raw := []byte(`{"role":"assistant","content":` + quoteTest(benchText) + `,"tool_calls":[{"id":"c1","type":"function","function":{"name":"pay","arguments":"{\"card\":\"4111 1111 1111 1111\"}"}}]}`)
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, _, err := r.JSON(raw); err != nil {
			b.Fatal(err)
		}
	}
}
