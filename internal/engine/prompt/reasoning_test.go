package prompt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
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

// TestCutReasoningAgreesWithEncodingJSON: cutting reasoning members out
// of the bytes (cutReasoning) leaves the value encoding/json would leave
// by decoding the reply, deleting them and encoding it again, for replies
// of every shape: member names escaped or case-folded, strings holding
// quotes, backslashes, braces and escapes, nested values, whitespace.
func TestCutReasoningAgreesWithEncodingJSON(t *testing.T) {
	names := []string{`role`, `content`, `tool_calls`, `reasoning`, `Reasoning_Content`, `reasoning_details`, `\u0072easoning`,
		`thinking_blocks`, `thin\u212aing_blocks`, `thinking_blocks_sha256`, `reasoning_details_sha256`, `reasoningless`, `r\u00e9sum\u00e9`, `ñame`}
	values := []string{`"plain"`, `"a \"quoted\" {brace} [x] \\ back\\\\slash"`, `"\u00e9\ud83d\ude00"`, `null`, `true`, `-1.5e3`, `12`,
		`{"a":[1,{"b":"}]\""}],"c":{}}`, `[]`, `[ "x" , { "y" : "]" } ]`, `{}`, `"reasoning"`}
	blanks := []string{"", " ", "\n\t", "\r\n  "}
	r := rand.New(rand.NewPCG(7, 7))
	for n := range 3000 {
		var b strings.Builder
		b.WriteString(blanks[r.IntN(len(blanks))] + "{")
		used := map[string]bool{}
		k := r.IntN(6)
		for i := 0; i < k; i++ {
			name := names[r.IntN(len(names))]
			var dec string
			json.Unmarshal([]byte(`"`+name+`"`), &dec)
			if used[dec] {
				continue // encoding/json keeps one of a name given twice
			}
			used[dec] = true
			if b.Len() > 0 && !strings.HasSuffix(b.String(), "{") {
				b.WriteString(",")
			}
			b.WriteString(blanks[r.IntN(len(blanks))] + `"` + name + `"` + blanks[r.IntN(len(blanks))] + ":" + blanks[r.IntN(len(blanks))])
			b.WriteString(values[r.IntN(len(values))] + blanks[r.IntN(len(blanks))])
		}
		b.WriteString("}" + blanks[r.IntN(len(blanks))])
		raw := []byte(b.String())
		if !json.Valid(raw) {
			t.Fatalf("case %d: built invalid JSON %s", n, raw)
		}
		got, ok := cutReasoning(raw)
		if !ok {
			t.Fatalf("cutReasoning(%s) failed", raw)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err != nil {
			t.Fatal(err)
		}
		for k := range fields {
			if isReasoning(k) {
				delete(fields, k)
			}
		}
		want, _ := json.Marshal(fields)
		var a, c any
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatalf("cutReasoning(%s) = %s: %v", raw, got, err)
		}
		json.Unmarshal(want, &c)
		if fmt.Sprint(a) != fmt.Sprint(c) {
			t.Errorf("cutReasoning(%s)\n= %s\nwant %s", raw, got, want)
		}
	}
	for _, bad := range []string{`[1]`, `{"a":1`, `{"a" 1}`, `{"a":"x}`, `"s"`, `{"a":1,}`, ``} {
		if _, ok := cutReasoning([]byte(bad)); ok {
			t.Errorf("cutReasoning(%s) read it as an object", bad)
		}
	}
}
