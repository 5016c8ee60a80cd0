package prompt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestWithoutReasoningHowEverSpelled: a stored reply's reasoning member
// is left out however its name is spelled — with JSON escapes, in
// another case or with the Unicode letters that fold to ASCII ones
// (encoding/json matches a struct's members case-insensitively, so
// memgate's own dialects would read them), or given twice (a provider
// that keeps the first of two members must not be left the one a
// last-wins decoder skipped). The signed blocks stay, once, when
// thinking is replayed.
func TestWithoutReasoningHowEverSpelled(t *testing.T) {
	const blocks = `[{"type":"thinking","thinking":"t","signature":"s"}]`
	for _, tc := range []struct {
		name     string
		raw      string
		thinking bool
	}{
		{"escaped first letter", `{"role":"assistant","content":"Hi.","\u0072easoning_content":"secret plan"}`, false},
		{"escaped last letter", `{"role":"assistant","content":"Hi.","reasonin\u0067":"secret plan"}`, false},
		{"escaped underscore", `{"role":"assistant","content":"Hi.","reasoning\u005fcontent":"secret plan"}`, false},
		{"escaped signed blocks", `{"role":"assistant","content":"Hi.","\u0074hinking_blocks":` + blocks + `}`, false},
		{"other case", `{"role":"assistant","content":"Hi.","Reasoning_Content":"secret plan"}`, false},
		{"upper case", `{"role":"assistant","content":"Hi.","REASONING":"secret plan"}`, false},
		{"kelvin sign", `{"role":"assistant","content":"Hi.","thin\u212aing_blocks":` + blocks + `}`, false},
		{"kelvin sign literal", "{\"role\":\"assistant\",\"content\":\"Hi.\",\"thin\u212aing_blocks\":" + blocks + "}", false},
		{"long s literal", "{\"role\":\"assistant\",\"content\":\"Hi.\",\"rea\u017foning_content\":\"secret plan\"}", false},
		{"twice", `{"role":"assistant","content":"Hi.","reasoning_content":"secret plan","reasoning_content":"x"}`, false},
		{"twice, escaped second", `{"role":"assistant","reasoning_content":"x","content":"Hi.","reasoning_con\u0074ent":"secret plan"}`, false},
		{"case variant beside signed blocks", `{"role":"assistant","content":"Hi.","thinking_blocks":` + blocks + `,"Thinking_Blocks":[{"type":"thinking","thinking":"secret plan","signature":"s2"}]}`, true},
		{"escaped reasoning beside signed blocks", `{"role":"assistant","content":"Hi.","thinking_blocks":` + blocks + `,"re\u0061soning":"secret plan"}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mustMsg(t, tc.raw)
			got := withoutReasoning(m, true, tc.thinking)
			if left := reasoningMembers(t, got.Raw, tc.thinking); len(left) > 0 {
				t.Errorf("reasoning %q left in\n%s", left, got.Raw)
			}
			if !strings.Contains(string(got.Raw), `"content":"Hi."`) {
				t.Errorf("the reply's text is lost:\n%s", got.Raw)
			}
			if tc.thinking && !strings.Contains(string(got.Raw), `"signature":"s"`) {
				t.Errorf("the signed blocks are lost:\n%s", got.Raw)
			}
		})
	}
}

// TestWithoutReasoningKeepsOtherRepliesAsStored: a reply without
// reasoning keeps its bytes, escapes and all.
func TestWithoutReasoningKeepsOtherRepliesAsStored(t *testing.T) {
	for _, raw := range []string{
		`{"role":"assistant","content":"Ol\u00e1, Ana \u003cb\u003e."}`,
		`{"role":"assistant","content":"my reasoning is \"sound\""}`,
		`{"role":"assistant","content":"Hi.","reasoningless":true}`,
	} {
		m := mustMsg(t, raw)
		if got := withoutReasoning(m, false, false); !bytes.Equal(got.Raw, m.Raw) {
			t.Errorf("%s\nbecame\n%s", m.Raw, got.Raw)
		}
	}
}

// reasoningMembers returns the members of the JSON object raw that a
// provider or encoding/json could read as reasoning (all but one
// thinking_blocks, spelled so, when thinking), and every member given
// more than once.
func reasoningMembers(t *testing.T, raw []byte, thinking bool) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", raw)
	}
	seen := map[string]bool{}
	var out []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		k := tok.(string)
		if seen[k] {
			out = append(out, fmt.Sprintf("%s (twice)", k))
		}
		seen[k] = true
		for _, f := range reasoningFields {
			if strings.EqualFold(k, f) && !(thinking && k == signedThinking) {
				out = append(out, k)
			}
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// BenchmarkWithoutReasoning measures withoutReasoning over stored
// replies as a continuation sees them: most without reasoning (plain,
// with escaped non-ASCII text as Python clients send it, with HTML
// escapes as Go encodes it), some with.
func BenchmarkWithoutReasoning(b *testing.B) {
	text := strings.Repeat("The weather in Porto is mild in spring; bring a light jacket. ", 20)
	for _, c := range []struct{ name, raw string }{
		{"plain", fmt.Sprintf(`{"role":"assistant","content":%q}`, text)},
		{"escaped-non-ascii", fmt.Sprintf(`{"role":"assistant","content":%q}`, strings.ReplaceAll(text, "e", `\u00e9`))},
		{"escaped-html", fmt.Sprintf(`{"role":"assistant","content":%q}`, strings.ReplaceAll(text, ";", `\u003c`))},
		{"reasoning", fmt.Sprintf(`{"role":"assistant","content":%q,"reasoning_content":%q}`, text, text)},
	} {
		b.Run(c.name, func(b *testing.B) {
			m := mustMsg(b, strings.ReplaceAll(c.raw, `\\u`, `\u`))
			b.ReportAllocs()
			for b.Loop() {
				withoutReasoning(m, false, false)
			}
		})
	}
}
