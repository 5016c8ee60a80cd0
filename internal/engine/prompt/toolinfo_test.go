package prompt

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/memgate/memgate/internal/memory"
)

// TestToolCallKeyFolds: no non-ASCII rune folds, as encoding/json folds
// keys (simple case folding, and ToUpper of ToLower), to a character of
// "tool_call", which mayNameToolCall relies on.
func TestToolCallKeyFolds(t *testing.T) {
	for r := rune(utf8.RuneSelf); r <= unicode.MaxRune; r++ {
		folds := []rune{unicode.ToUpper(unicode.ToLower(r)), unicode.ToLower(r), unicode.ToUpper(r)}
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			folds = append(folds, f)
		}
		for _, f := range folds {
			if f < utf8.RuneSelf && strings.ContainsRune("tool_callTOOL_CALL", f) {
				t.Errorf("%U folds to %q", r, f)
			}
		}
	}
}

// TestToolInfo: toolInfo reads the ids of an assistant message's
// tool_calls and the tool_call_id a tool message answers, matching keys as
// encoding/json does (any case, \u escapes, the last of repeated keys), and
// reads nothing from a message that is not an object, whose tool fields
// have the wrong type, or that only mentions tool calls in its text.
func TestToolInfo(t *testing.T) {
	tests := []struct {
		name, raw string
		calls     []string
		answers   string
	}{
		{"empty", ``, nil, ""},
		{"null", `null`, nil, ""},
		{"truncated", `{`, nil, ""},
		{"array", `[]`, nil, ""},
		{"plain reply", `{"role":"assistant","content":"hi"}`, nil, ""},
		{"two calls", `{"role":"assistant","tool_calls":[{"id":"a"},{"id":"b"}]}`, []string{"a", "b"}, ""},
		{"key in mixed case", `{"role":"assistant","Tool_Calls":[{"id":"a"}]}`, []string{"a"}, ""},
		{"keys in upper case", `{"role":"assistant","TOOL_CALLS":[{"ID":"a"}]}`, []string{"a"}, ""},
		{"long s folds to s", `{"role":"assistant","tool_callſ":[{"id":"a"}]}`, []string{"a"}, ""},
		{"escaped first letter", `{"role":"assistant","\u0074ool_calls":[{"id":"a"}]}`, []string{"a"}, ""},
		{"escaped underscore", `{"role":"assistant","tool\u005fcalls":[{"id":"a"}]}`, []string{"a"}, ""},
		{"last key wins", `{"role":"assistant","tool_calls":[{"id":"a"}],"tool_calls":null}`, nil, ""},
		{"calls of the wrong type", `{"role":"assistant","tool_calls":"oops"}`, nil, ""},
		{"another field of the wrong type", `{"role":"assistant","tool_calls":[{"id":"a"}],"content":5}`, []string{"a"}, ""},
		{"call without id", `{"role":"assistant","tool_calls":[{"type":"function"}]}`, []string{""}, ""},
		{"tool answer", `{"role":"tool","tool_call_id":"a","content":"x"}`, nil, "a"},
		{"answer key in upper case", `{"role":"tool","TOOL_CALL_ID":"a"}`, nil, "a"},
		{"answer key escaped", `{"role":"tool","tool_call_\u0069d":"a"}`, nil, "a"},
		{"answer id escaped", `{"role":"tool","tool_call_id":"a\u00e9"}`, nil, "aé"},
		{"answer id of the wrong type", `{"role":"tool","tool_call_id":7}`, nil, ""},
		{"mentions tool_call in text", `{"role":"user","content":"what is a tool_call?"}`, nil, ""},
		{"escape elsewhere", `{"role":"user","content":"caf\u00e9"}`, nil, ""},
		{"near miss key", `{"role":"assistant","tool_call":[{"id":"a"}]}`, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls, answers := toolInfo(memory.Message{Raw: []byte(tt.raw)})
			if !slices.Equal(calls, tt.calls) || (calls == nil) != (tt.calls == nil) || answers != tt.answers {
				t.Errorf("toolInfo(%s) = %q, %q; want %q, %q", tt.raw, calls, answers, tt.calls, tt.answers)
			}
		})
	}
}

// TestToolInfoReadsGeneratedTurns: over random conversations, toolInfo
// gives an assistant message that calls tools exactly the ids it was built
// with, in order, and each tool result the id it answers; every other
// message gives nothing.
func TestToolInfoReadsGeneratedTurns(t *testing.T) {
	g := &convGen{r: rand.New(rand.NewPCG(9, 9))}
	for _, m := range g.turns(300) {
		var f struct {
			Role      string `json:"role"`
			ToolCalls []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
			ToolCallID string `json:"tool_call_id"`
		}
		if err := json.Unmarshal(m.Raw, &f); err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, c := range f.ToolCalls {
			want = append(want, c.ID)
		}
		calls, answers := toolInfo(m)
		if !slices.Equal(calls, want) || answers != f.ToolCallID {
			t.Fatalf("toolInfo(%s) = %q, %q; want %q, %q", m.Raw, calls, answers, want, f.ToolCallID)
		}
		if f.Role == "tool" && answers == "" || f.Role != "tool" && answers != "" {
			t.Fatalf("toolInfo(%s) answers %q", m.Raw, answers)
		}
	}
}
