package record

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/memgate/memgate/internal/memory"
)

func TestSanitizeText(t *testing.T) {
	tests := []struct {
		name, in, want string
		changed        bool
	}{
		{"clean", "olá, Porto", "olá, Porto", false},
		{"nul", "a\x00b", "ab", true},
		{"invalid utf8", "a\xffb", "a\uFFFDb", true},
		{"truncated rune", "caf\xc3", "caf\uFFFD", true},
		{"both", "\x00\xfe", "\uFFFD", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := SanitizeText(tt.in)
			if got != tt.want || changed != tt.changed {
				t.Fatalf("SanitizeText(%q) = %q, %v; want %q, %v", tt.in, got, changed, tt.want, tt.changed)
			}
		})
	}
}

func TestSanitizeRaw(t *testing.T) {
	tests := []struct {
		name, in, want string
		changed        bool
	}{
		{"clean kept byte for byte", `{"role": "user",  "content":"hi"}`, `{"role": "user",  "content":"hi"}`, false},
		{"nul escape", `{"content":"a\u0000b"}`, `{"content":"a\ufffdb"}`, true},
		{"escaped backslash is not an escape", `{"content":"a\\u0000b"}`, `{"content":"a\\u0000b"}`, false},
		{"three backslashes", `{"content":"a\\\u0000b"}`, `{"content":"a\\\ufffdb"}`, true},
		{"invalid utf8", "{\"content\":\"a\xffb\"}", `{"content":"a` + "\uFFFD" + `b"}`, true},
		{"raw nul", "{\"content\":\"a\x00b\"}", `{"content":"ab"}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, changed := SanitizeRaw(json.RawMessage(tt.in))
			if string(got) != tt.want || changed != tt.changed {
				t.Fatalf("SanitizeRaw(%q) = %q, %v; want %q", tt.in, got, changed, tt.want)
			}
			if !json.Valid(got) {
				t.Fatalf("result is not JSON: %q", got)
			}
			var v struct{ Content string }
			if err := json.Unmarshal(got, &v); err != nil {
				t.Fatal(err)
			}
			if !utf8.ValidString(v.Content) {
				t.Fatalf("decoded content is not UTF-8: %q", v.Content)
			}
			for _, r := range v.Content {
				if r == 0 {
					t.Fatalf("decoded content holds NUL: %q", v.Content)
				}
			}
		})
	}
}

func TestSanitizeExchangeLeavesInputAlone(t *testing.T) {
	in := memory.Exchange{
		Model: "gpt\x00",
		Turn:  []memory.Message{{Role: "user", Content: "bad\xff", Raw: json.RawMessage("{\"role\":\"user\",\"content\":\"bad\xff\"}")}},
		Reply: memory.Message{Role: "assistant", Content: "ok"},
	}
	out, n := SanitizeExchange(in)
	if n != 2 {
		t.Fatalf("changed %d fields, want 2 (turn message, model)", n)
	}
	if out.Turn[0].Content != "bad\uFFFD" || out.Model != "gpt" {
		t.Fatalf("sanitized = %+v", out)
	}
	if in.Turn[0].Content != "bad\xff" {
		t.Fatal("SanitizeExchange changed its input's messages")
	}
}
