package responses

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/dialect/dialecttest"
	"github.com/memgate/memgate/internal/memory"
)

// TestItemReferenceHoldsHistory: a client that resends its history with
// the provider's stored output items named by id — as the Vercel AI SDK's
// OpenAI provider does by default (store true), sending each earlier
// assistant message as {"type":"item_reference"} — sends a history memory
// recorded when it relayed it. Memory reads only what follows the last
// reference (and the rest of that response's output), as new input; the
// upstream gets the client's items as sent, the memory block in the
// instructions, and no stored turn: a stored turn before them repeated the
// conversation's first exchange, and the client's first message, then
// read as part of the current turn, was stored a second time.
func TestItemReferenceHoldsHistory(t *testing.T) {
	for _, tt := range []struct {
		name, input string
		want        []string // memory's messages: role: content
	}{
		{"second_turn",
			`[{"type":"message","role":"user","content":"I live in Lisbon."},` +
				`{"type":"item_reference","id":"msg_1"},` +
				`{"role":"user","content":[{"type":"input_text","text":"Where do I live?"}]}]`,
			[]string{"user: Where do I live?"}},
		{"tool_loop",
			`[{"role":"user","content":[{"type":"input_text","text":"Weather in Porto?"}]},` +
				`{"type":"item_reference","id":"msg_3"},` +
				`{"type":"function_call","call_id":"call_3","name":"get_weather","arguments":"{\"city\":\"Porto\"}"},` +
				`{"type":"function_call_output","call_id":"call_3","output":"18C"}]`,
			[]string{"tool: 18C"}},
		{"reference_then_output",
			`[{"role":"user","content":"Hi"},{"type":"reasoning","id":"rs_1","summary":[]},{"type":"item_reference","id":"msg_0"},` +
				`{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"Hello."}]},` +
				`{"role":"user","content":"Bye"}]`,
			[]string{"user: Bye"}},
		{"nothing_after_the_reference",
			`[{"role":"user","content":"Hi"},{"type":"item_reference","id":"msg_1"}]`,
			[]string{"user: Hi"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(`{"model":"gpt-4o","input":` + tt.input + `}`))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range r.Messages {
				got = append(got, m.Role+": "+m.Content)
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("memory reads %q, want %q", got, tt.want)
			}
			if !r.HeldHistory() {
				t.Error("HeldHistory() = false, want true: stored turns would repeat the provider's items")
			}
			out, err := r.Render(dialecttest.Prepared(r.Conversation, "<memory>\nFacts:\n- city: Lisbon\n</memory>", storedTurns(t), 0))
			if err != nil {
				t.Fatal(err)
			}
			var sent struct {
				Input        json.RawMessage `json:"input"`
				Instructions string          `json:"instructions"`
			}
			if err := json.Unmarshal(out, &sent); err != nil {
				t.Fatal(err)
			}
			if !jsonEqualBytes(sent.Input, []byte(tt.input)) {
				t.Errorf("input upstream %s, want the client's %s", sent.Input, tt.input)
			}
			if !strings.Contains(sent.Instructions, "city: Lisbon") {
				t.Errorf("instructions %q, want the memory block", sent.Instructions)
			}
		})
	}
}

// TestItemReferenceKeepsLaterTrim: what memory trims of the items after a
// reference is trimmed; the items up to it go first, untouched.
func TestItemReferenceKeepsLaterTrim(t *testing.T) {
	input := `[{"role":"user","content":"One"},{"type":"item_reference","id":"msg_1"},` +
		`{"role":"user","content":"Two"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Ok."}]},` +
		`{"role":"user","content":"Three"}]`
	r, err := ParseRequest([]byte(`{"model":"gpt-4o","input":` + input + `}`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Render(dialecttest.Prepared(r.Conversation, "Summary: counting", nil, 2))
	if err != nil {
		t.Fatal(err)
	}
	var sent struct{ Input []json.RawMessage }
	if err := json.Unmarshal(out, &sent); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, raw := range sent.Input {
		m, _ := memory.ParseMessage(raw)
		var it item
		json.Unmarshal(raw, &it)
		got = append(got, it.kind()+":"+m.Content)
	}
	want := []string{"message:One", "item_reference:", "message:Three"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("input upstream %q, want %q", got, want)
	}
}
