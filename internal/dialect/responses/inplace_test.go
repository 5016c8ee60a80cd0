package responses

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// TestRenderKeepsResentTurnBlockInPlace: with keep_recall_resent, inject
// puts the recalled block a resent user message was sent with before that
// message and this request's before its question (the block kept and the
// one shown once, each its own item). Each goes upstream as a developer
// message item right before its user message, so the input through the
// previous question repeats the previous request's input, item for item.
// With previous_response_id the provider holds the history and would keep
// a block put in input for good: every block goes in the instructions.
func TestRenderKeepsResentTurnBlockInPlace(t *testing.T) {
	const items = `[` +
		`{"role":"user","content":"I live in Lisbon."},` +
		`{"type":"message","role":"assistant","id":"msg_1","content":[{"type":"output_text","text":"Noted."}]},` +
		`{"role":"user","content":"What is my dog called?"},` +
		`{"type":"message","role":"assistant","id":"msg_2","content":[{"type":"output_text","text":"Rex."}]},` +
		`{"role":"user","content":"And what does he love?"}]`
	const (
		kept = "<memory>kept: a dog named Rex</memory>"
		now  = "<memory>now: Rex loves the beach</memory>"
		once = "<memory>once: Rex swims</memory>"
	)
	block := func(text string) json.RawMessage {
		b, _ := json.Marshal(map[string]string{"role": "system", "content": text})
		return b
	}
	dev := func(text string) string {
		b, _ := json.Marshal(map[string]string{"type": "message", "role": "developer", "content": text})
		return string(b)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(items), &raw); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, extra string
		want        []string // input items upstream
		instr       []string // what instructions hold
	}{
		{name: "client holds the history",
			want: []string{string(raw[0]), string(raw[1]), dev(kept), string(raw[2]), string(raw[3]), dev(now), dev(once), string(raw[4])}},
		{name: "previous_response_id", extra: `"previous_response_id":"resp_1",`,
			want: []string{string(raw[0]), string(raw[1]), string(raw[2]), string(raw[3]), string(raw[4])}, instr: []string{kept, now, once}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(`{"model":"gpt-4o",` + tc.extra + `"instructions":"Be brief.","input":` + items + `}`))
			if err != nil {
				t.Fatal(err)
			}
			m := r.Messages // the instructions, then the five items
			p := memory.Prepared{
				Messages: []json.RawMessage{m[0].Raw, m[1].Raw, m[2].Raw, block(kept), m[3].Raw, m[4].Raw, block(now), block(once), m[5].Raw},
				Blocks:   []memory.Block{{At: 3, Text: kept}, {At: 6, Text: now}, {At: 7, Text: once}},
			}
			out, err := r.Render(p)
			if err != nil {
				t.Fatal(err)
			}
			var sent struct {
				Instructions string            `json:"instructions"`
				Input        []json.RawMessage `json:"input"`
			}
			if err := json.Unmarshal(out, &sent); err != nil {
				t.Fatal(err)
			}
			if len(sent.Input) != len(tc.want) {
				t.Fatalf("%d input items upstream, want %d: %s", len(sent.Input), len(tc.want), out)
			}
			for i, w := range tc.want {
				if !jsonEqualBytes(sent.Input[i], []byte(w)) {
					t.Errorf("item %d:\n got %s\nwant %s", i, sent.Input[i], w)
				}
			}
			for _, text := range tc.instr {
				if !strings.Contains(sent.Instructions, text) {
					t.Errorf("instructions %q, want them to hold %q", sent.Instructions, text)
				}
			}
		})
	}
}
