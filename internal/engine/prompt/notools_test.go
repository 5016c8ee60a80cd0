package prompt

import (
	"context"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// TestPrepareNoTools pins how stored turns are replayed for a request that
// declares no tools (memory.Request.NoTools): without their tool calls and
// tool results, an assistant message keeping its text (rewritten with its
// keys sorted) and dropped when it has none; two messages of one role a
// drop leaves side by side joined into one, so that roles still alternate
// and no user text is lost; with tools, unchanged. The client's own
// messages are never altered, and a stored call the client's messages
// answer stays whole.
func TestPrepareNoTools(t *testing.T) {
	const (
		aSay      = `{"role":"assistant","content":"Let me check.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{}"}}]}`
		aFunc     = `{"role":"assistant","content":null,"function_call":{"name":"weather","arguments":"{}"}}`
		funcRes   = `{"role":"function","name":"weather","content":"18C"}`
		aRefusal  = `{"role":"assistant","content":null,"refusal":"I can't.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{}"}}]}`
		aRefused  = `{"content":null,"refusal":"I can't.","role":"assistant"}`
		aEmptyStr = `{"role":"assistant","content":"  ","tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{}"}}]}`
		aEmpty    = `{"role":"assistant","content":""}`
		aSaidA2   = `{"content":"Let me check.\n\n18C at 14:00.","role":"assistant"}`
		aRefA2    = `{"content":"18C at 14:00.","refusal":"I can't.","role":"assistant"}`
		u2u1      = `{"content":"Weather in Paris?\n\nMy name is Ana.","role":"user"}`
		uParts    = `{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}`
		uPartsU1  = `{"content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}},{"type":"text","text":"My name is Ana."}],"role":"user"}`
		uNamed    = `{"role":"user","name":"bob","content":"My name is Bob."}`
	)
	full := []string{u1, a1, u2, aCall, tool1, tool2, a2}
	tests := []struct {
		name    string
		stored  []string
		client  []string
		noTools bool
		want    []string
	}{
		{
			name:   "with tools the tool turns are replayed",
			stored: full, client: []string{uNew},
			want: []string{u1, a1, u2, aCall, tool1, tool2, a2, uNew},
		},
		{
			name:   "without tools calls without text and their results are left out",
			stored: full, client: []string{uNew}, noTools: true,
			want: []string{u1, a1, u2, a2, uNew},
		},
		{
			name:   "without tools a call's text is kept, joined with the answer after its results",
			stored: []string{u2, aSay, tool1, a2}, client: []string{uNew}, noTools: true,
			want: []string{u2, aSaidA2, uNew},
		},
		{
			name:   "without tools a refusal is joined with the answer after its results",
			stored: []string{u2, aRefusal, tool1, a2}, client: []string{uNew}, noTools: true,
			want: []string{u2, aRefA2, uNew},
		},
		{
			name:   "without tools a question whose tool loop got no answer is joined with the next",
			stored: []string{u2, aCall, tool1, tool2, u1, a1}, client: []string{uNew}, noTools: true,
			want: []string{u2u1, a1, uNew},
		},
		{
			name:   "without tools an empty reply is left out and the questions around it joined",
			stored: []string{u2, aEmpty, u1, a1}, client: []string{uNew}, noTools: true,
			want: []string{u2u1, a1, uNew},
		},
		{
			name:   "without tools parts and text are joined as parts",
			stored: []string{uParts, aCall, tool1, tool2, u1, a1}, client: []string{uNew}, noTools: true,
			want: []string{uPartsU1, a1, uNew},
		},
		{
			name:   "without tools messages of different names are not joined",
			stored: []string{u2, aCall, tool1, tool2, uNamed, a1}, client: []string{uNew}, noTools: true,
			want: []string{u2, uNamed, a1, uNew},
		},
		{
			name:   "without tools messages side by side as stored are not joined",
			stored: []string{u2, u1, a1}, client: []string{uNew}, noTools: true,
			want: []string{u2, u1, a1, uNew},
		},
		{
			name:   "with tools an empty reply is replayed",
			stored: []string{u2, aEmpty, u1, a1}, client: []string{uNew},
			want: []string{u2, aEmpty, u1, a1, uNew},
		},
		{
			name:   "without tools a refusal is kept, blank text is not",
			stored: []string{u2, aRefusal, tool1, u1, aEmptyStr, tool1, a2}, client: []string{uNew}, noTools: true,
			want: []string{u2, aRefused, u1, a2, uNew},
		},
		{
			name:   "without tools a legacy function call and its result are left out",
			stored: []string{u2, aFunc, funcRes, a2}, client: []string{uNew}, noTools: true,
			want: []string{u2, a2, uNew},
		},
		{
			name:   "the client's own tool turns stay",
			stored: []string{u1, a1}, client: []string{u2, aCall, tool1, tool2}, noTools: true,
			want: []string{u1, a1, u2, aCall, tool1, tool2},
		},
		{
			name:   "a stored call the client answers stays whole",
			stored: []string{u2, aSay, tool1, a2, u2, aCall, tool1}, client: []string{tool2}, noTools: true,
			want: []string{u2, aSaidA2, u2, aCall, tool1, tool2},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stored := msgs(t, tc.stored...)
			before := make([]string, len(stored))
			for i, m := range stored {
				before[i] = string(m.Raw)
			}
			a := New(&fakeHistory{msgs: stored}, byteCounter{}, Options{RecentMessages: 20}, nil)
			req := request(t, memory.ModeOn, tc.client...)
			req.NoTools = tc.noTools
			got, err := a.Prepare(context.Background(), req)
			if err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			checkMessages(t, got.Messages, tc.want)
			for i, m := range stored {
				if string(m.Raw) != before[i] {
					t.Fatalf("stored message %d changed: %s", i, m.Raw)
				}
			}
			if want := (byteCounter{}).Messages("", got.Messages); got.TokensSent != want {
				t.Fatalf("TokensSent = %d, want %d", got.TokensSent, want)
			}
		})
	}
}
