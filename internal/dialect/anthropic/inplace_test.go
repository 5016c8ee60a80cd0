package anthropic

import (
	"encoding/json"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// TestRenderKeepsResentTurnBlockInPlace: with keep_recall_resent, inject
// puts the recalled block a resent user turn was sent with before that
// turn and this request's before its question. Each goes at the start of
// its own user message (after the tool results of a message that has
// them), so the history through the previous question repeats the
// previous request's upstream body, a cache breakpoint there included.
func TestRenderKeepsResentTurnBlockInPlace(t *testing.T) {
	const body = `{"model":"claude-sonnet-4-5","max_tokens":256,"messages":[` +
		`{"role":"user","content":"I live in Lisbon."},` +
		`{"role":"assistant","content":"Noted."},` +
		`{"role":"user","content":[{"type":"text","text":"What is my dog called?","cache_control":{"type":"ephemeral"}}]},` +
		`{"role":"assistant","content":"Rex."},` +
		`{"role":"user","content":"And what does he love?"}]}`
	r, err := ParseRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	block := func(text string) json.RawMessage {
		b, _ := json.Marshal(map[string]string{"role": "system", "content": text})
		return b
	}
	m := r.Messages
	p := memory.Prepared{
		Messages: []json.RawMessage{m[0].Raw, m[1].Raw, block("<memory>kept: a dog named Rex</memory>"), m[2].Raw, m[3].Raw,
			block("<memory>now: Rex loves the beach</memory>"), m[4].Raw},
		Blocks: []memory.Block{{At: 2, Text: "<memory>kept: a dog named Rex</memory>"}, {At: 5, Text: "<memory>now: Rex loves the beach</memory>"}},
	}
	out, err := r.Render(p)
	if err != nil {
		t.Fatal(err)
	}
	var sent struct{ Messages []json.RawMessage }
	if err := json.Unmarshal(out, &sent); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"role":"user","content":"I live in Lisbon."}`,
		`{"role":"assistant","content":"Noted."}`,
		`{"role":"user","content":[{"type":"text","text":"<memory>kept: a dog named Rex</memory>"},{"type":"text","text":"What is my dog called?","cache_control":{"type":"ephemeral"}}]}`,
		`{"role":"assistant","content":"Rex."}`,
		`{"role":"user","content":[{"type":"text","text":"<memory>now: Rex loves the beach</memory>"},{"type":"text","text":"And what does he love?"}]}`,
	}
	if len(sent.Messages) != len(want) {
		t.Fatalf("%d messages upstream, want %d: %s", len(sent.Messages), len(want), out)
	}
	for i, w := range want {
		if got := string(sent.Messages[i]); got != w {
			t.Errorf("message %d:\n got %s\nwant %s", i, got, w)
		}
	}

}
