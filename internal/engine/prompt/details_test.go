package prompt

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/dialect/dialecttest"
	"github.com/memgate/memgate/internal/memory"
)

// openRouterCall returns a stored OpenRouter reply that calls a tool with
// its reasoning: the plain text (reasoning), and reasoning_details as the
// provider gave them — a summary, a signed text, an unsigned text and an
// encrypted detail — with their digest as received (digest false: none,
// as stored before digests) and with details changed since by edit.
func openRouterCall(t *testing.T, id, details string, digest bool, edit func(string) string) memory.Message {
	t.Helper()
	sum := ""
	if digest {
		sum = fmt.Sprintf(`,"reasoning_details_sha256":%q`, memory.ReasoningDigest([]byte(details)))
	}
	return mustMsg(t, `{"role":"assistant","content":null,"tool_calls":[{"id":"`+id+`","type":"function","function":{"name":"weather","arguments":"{}"}}],`+
		`"reasoning":"plain thoughts","reasoning_details":`+edit(details)+sum+`}`)
}

const (
	orDetails = `[{"type":"reasoning.summary","summary":"summary thoughts","id":null,"format":"openai-responses-v1","index":0},` +
		`{"type":"reasoning.text","text":"signed thoughts \ufffd","signature":"EqQBsig==","id":null,"format":"anthropic-claude-v1","index":1},` +
		`{"type":"reasoning.text","text":"unsigned thoughts","signature":null,"id":null,"format":"unknown","index":2},` +
		`{"type":"reasoning.encrypted","data":"gAAAAABencrypted","id":"rs_1","format":"openai-responses-v1","index":3}]`
	// orSent is what goes back of orDetails: the provider's own signed or
	// encrypted details, unaltered.
	orSent = `[{"type":"reasoning.text","text":"signed thoughts \ufffd","signature":"EqQBsig==","id":null,"format":"anthropic-claude-v1","index":1},` +
		`{"type":"reasoning.encrypted","data":"gAAAAABencrypted","id":"rs_1","format":"openai-responses-v1","index":3}]`
)

// TestReplayedReasoningDetailsOnlyForTheToolLoop: a client that sends only
// its newest message answers a stored OpenRouter tool call. The call goes
// back with the provider's signed and encrypted reasoning_details as
// stored — which the provider requires to continue its tool loop — and
// nothing else of its reasoning (plain text, summaries, unsigned text,
// memgate's digest). No other stored turn keeps any reasoning, nor the
// call once the loop is over (the client asks something new), nor
// details changed since the provider gave them.
func TestReplayedReasoningDetailsOnlyForTheToolLoop(t *testing.T) {
	same := func(s string) string { return s }
	earlier := openRouterCall(t, "call_0", orDetails, true, same)
	const res0 = `{"role":"tool","tool_call_id":"call_0","content":"12C"}`
	const ans0 = `{"role":"assistant","content":"12C in Lisbon.","reasoning":"old plain","reasoning_details":[{"type":"reasoning.encrypted","data":"gAAAAABold","index":0}]}`
	const ask0 = `{"role":"user","content":"Weather in Lisbon?"}`
	const result = `{"role":"tool","tool_call_id":"call_1","content":"18C"}`
	const newAsk = `{"role":"user","content":"And tomorrow?"}`
	for _, tc := range []struct {
		name  string
		call  memory.Message
		after []string // stored after the call
		rest  string
		want  string // the call's reasoning_details upstream; "" none
	}{
		{"tool loop", openRouterCall(t, "call_1", orDetails, true, same), nil, result, orSent},
		{"loop over", openRouterCall(t, "call_1", orDetails, true, same), []string{result, `{"role":"assistant","content":"18C in Porto."}`}, newAsk, ""},
		{"redacted since", openRouterCall(t, "call_1", orDetails, true, func(s string) string {
			return strings.Replace(s, "signed thoughts", "[redacted:api_key] thoughts", 1)
		}), nil, result, ""},
		{"stored without digest", openRouterCall(t, "call_1", strings.Replace(orDetails, ` \ufffd`, "", 1), false, same), nil, result, strings.Replace(orSent, ` \ufffd`, "", 1)},
		{"replacement stored without digest", openRouterCall(t, "call_1", orDetails, false, same), nil, result, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stored := []memory.Message{mustMsg(t, ask0), earlier, mustMsg(t, res0), mustMsg(t, ans0), mustMsg(t, u2), tc.call}
			for _, raw := range tc.after {
				stored = append(stored, mustMsg(t, raw))
			}
			a := New(&fakeHistory{msgs: stored}, byteCounter{}, Options{RecentMessages: 20}, nil)
			p, err := a.Prepare(context.Background(), request(t, memory.ModeOn, tc.rest))
			if err != nil {
				t.Fatal(err)
			}
			got := joined(p)
			for _, leak := range []string{"plain thoughts", "old plain", "summary thoughts", "unsigned thoughts", "gAAAAABold", "_sha256", `"reasoning"`} {
				if strings.Contains(got, leak) {
					t.Errorf("%s went upstream:\n%s", leak, got)
				}
			}
			var call struct {
				Details json.RawMessage `json:"reasoning_details"`
			}
			n := 0
			for _, m := range p.Messages {
				if strings.Contains(string(m), `"call_1"`) && strings.Contains(string(m), `"assistant"`) {
					if err := json.Unmarshal(m, &call); err != nil {
						t.Fatal(err)
					}
					n++
				}
				if strings.Contains(string(m), `"call_0"`) && strings.Contains(string(m), "reasoning_details") {
					t.Errorf("an earlier loop's call kept its reasoning_details:\n%s", m)
				}
			}
			if n != 1 {
				t.Fatalf("the call went %d times:\n%s", n, got)
			}
			switch {
			case tc.want == "" && call.Details != nil:
				t.Errorf("reasoning_details %s went back", call.Details)
			case tc.want != "" && !dialecttest.SameJSON(t, call.Details, []byte(tc.want)):
				t.Errorf("reasoning_details\n%s\nwant\n%s", call.Details, tc.want)
			}
		})
	}
}

// TestReplayedThinkingOnlyForTheToolLoop: Anthropic's signed blocks too go
// back only with the calls of the tool loop the request continues, not
// with a turn the user has moved on from.
func TestReplayedThinkingOnlyForTheToolLoop(t *testing.T) {
	old := mustMsg(t, `{"role":"assistant","content":"Hi Ana.","thinking_blocks":[{"type":"thinking","thinking":"old","signature":"sigOld"}]}`)
	call := mustMsg(t, `{"role":"assistant","content":null,"tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"weather","arguments":"{}"}}],`+
		`"thinking_blocks":[{"type":"thinking","thinking":"check it","signature":"sig"}]}`)
	a := New(&fakeHistory{msgs: []memory.Message{mustMsg(t, u1), old, mustMsg(t, u2), call}}, byteCounter{}, Options{RecentMessages: 10}, nil)
	req := request(t, memory.ModeOn, `{"role":"tool","tool_call_id":"toolu_1","content":"18C"}`)
	req.ReplaysThinking = true
	p, err := a.Prepare(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := joined(p); strings.Contains(got, "sigOld") || !strings.Contains(got, `"signature":"sig"`) {
		t.Errorf("want only the loop's call with its signed blocks:\n%s", got)
	}
}
