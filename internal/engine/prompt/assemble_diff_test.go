package prompt

import (
	"math/rand/v2"
	"reflect"
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

// TestToolInfoMatchesReference: toolInfo, which decodes only a message
// that may name a tool-call key, answers what decoding every message
// answers (refToolInfo), for keys in any case, spelled with escapes or
// with letters encoding/json folds, in random messages with tool calls.
func TestToolInfoMatchesReference(t *testing.T) {
	raws := []string{
		``, `null`, `{`, `[]`, `{"role":"assistant","content":"hi"}`,
		`{"role":"assistant","tool_calls":[{"id":"a"},{"id":"b"}]}`,
		`{"role":"assistant","Tool_Calls":[{"id":"a"}]}`,
		`{"role":"assistant","TOOL_CALLS":[{"ID":"a"}]}`,
		`{"role":"assistant","tool_callſ":[{"id":"a"}]}`,
		`{"role":"assistant","\u0074ool_calls":[{"id":"a"}]}`,
		`{"role":"assistant","tool\u005fcalls":[{"id":"a"}]}`,
		`{"role":"assistant","tool_calls":[{"id":"a"}],"tool_calls":null}`,
		`{"role":"assistant","tool_calls":"oops"}`,
		`{"role":"assistant","tool_calls":[{"id":"a"}],"content":5}`,
		`{"role":"tool","tool_call_id":"a","content":"x"}`,
		`{"role":"tool","TOOL_CALL_ID":"a"}`,
		`{"role":"tool","tool_call_\u0069d":"a"}`,
		`{"role":"tool","tool_call_id":"a\u00e9"}`,
		`{"role":"tool","tool_call_id":7}`,
		`{"role":"user","content":"what is a tool_call?"}`,
		`{"role":"user","content":"caf\u00e9"}`,
	}
	r := rand.New(rand.NewPCG(9, 9))
	g := &convGen{r: r}
	for _, m := range g.turns(200) {
		raws = append(raws, string(m.Raw))
	}
	for _, raw := range raws {
		m := memory.Message{Raw: []byte(raw)}
		calls, id := toolInfo(m)
		wantCalls, wantID := refToolInfo(m)
		if !reflect.DeepEqual(calls, wantCalls) || id != wantID {
			t.Errorf("toolInfo(%s) = %q, %q; want %q, %q", raw, calls, id, wantCalls, wantID)
		}
	}
}
