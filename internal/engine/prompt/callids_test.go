package prompt

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// replayedTools reads, from the messages of a prompt, each assistant
// message's tool call ids and each tool message's answered id, in order.
func replayedTools(tb testing.TB, raws []json.RawMessage) (calls [][]string, answers []string) {
	tb.Helper()
	for _, raw := range raws {
		var m struct {
			Role      string `json:"role"`
			ToolCalls []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
			ToolCallID string `json:"tool_call_id"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			tb.Fatalf("prompt message %s: %v", raw, err)
		}
		switch m.Role {
		case "assistant":
			var ids []string
			for _, c := range m.ToolCalls {
				ids = append(ids, c.ID)
			}
			if ids != nil {
				calls = append(calls, ids)
			}
		case "tool":
			answers = append(answers, m.ToolCallID)
		}
	}
	return calls, answers
}

// keyed returns msgs with the keys storing exchange id would give them.
func keyed(id string, msgs []memory.Message) []memory.Message {
	for i := range msgs {
		msgs[i].Key, msgs[i].Seq = memory.Key(id, i), int64(i+1)
	}
	return msgs
}

// TestStoredToolCallsWithoutIDGetOne: a tool call a provider sent without
// an id (stored as it came) and the results answering it are replayed with
// one id they share — not empty, which the Responses API (a function_call
// without call_id), Anthropic (a tool_use without id) and OpenAI chat
// reject, failing every later request of the conversation. The id is the
// same on every request (the prompt's prefix stays cacheable) and differs
// between calls; the results are paired with the calls in order. A stored
// call the client's own messages answer without an id keeps its empty id,
// so the pair the client built still matches.
func TestStoredToolCallsWithoutIDGetOne(t *testing.T) {
	const (
		noID1   = `{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"weather","arguments":"{}"}},{"id":"","type":"function","function":{"name":"time","arguments":"{}"}}]}`
		noIDRes = `{"role":"tool","content":"18C"}`
		noIDRs2 = `{"role":"tool","tool_call_id":"","content":"14:00"}`
		noID2   = `{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"weather","arguments":"{}"}}]}`
		noIDRs3 = `{"role":"tool","content":"19C"}`
	)
	stored := keyed("ex-1", msgs(t, u2, noID1, noIDRes, noIDRs2, a2))
	stored = append(stored, keyed("ex-2", msgs(t, u2, noID2, noIDRs3, a2))...)
	prepare := func() []json.RawMessage {
		h := &fakeHistory{msgs: stored}
		a := New(h, byteCounter{}, Options{RecentMessages: 20}, nil)
		got, err := a.Prepare(context.Background(), request(t, memory.ModeOn, uNew))
		if err != nil {
			t.Fatal(err)
		}
		return got.Messages
	}
	first := prepare()
	calls, answers := replayedTools(t, first)
	if len(calls) != 2 || len(calls[0]) != 2 || len(calls[1]) != 1 || len(answers) != 3 {
		t.Fatalf("replayed calls %q and answers %q, want the two stored tool units whole:\n%s", calls, answers, first)
	}
	ids := append(slices.Clone(calls[0]), calls[1]...)
	for _, id := range ids {
		if id == "" {
			t.Fatalf("a replayed tool call has no id: calls %q", calls)
		}
	}
	if !slices.Equal(ids, answers) {
		t.Errorf("results answer %q, calls are %q: want each result paired with its call, in order", answers, ids)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(ids)))) != len(ids) {
		t.Errorf("tool call ids %q are not distinct", ids)
	}
	if again := prepare(); !slices.EqualFunc(first, again, func(a, b json.RawMessage) bool { return string(a) == string(b) }) {
		t.Errorf("the replay differs between two requests:\n%s\n%s", first, again)
	}
	// The stored messages themselves are not changed (they may be a
	// cache's).
	if string(stored[1].Raw) != noID1 || string(stored[2].Raw) != noIDRes {
		t.Errorf("stored messages changed: %s %s", stored[1].Raw, stored[2].Raw)
	}

	// The client answers the stored call, without an id: the pair stays
	// as the client built it.
	h := &fakeHistory{msgs: keyed("ex-3", msgs(t, u2, noID2))}
	a := New(h, byteCounter{}, Options{RecentMessages: 20}, nil)
	got, err := a.Prepare(context.Background(), request(t, memory.ModeOn, noIDRs3))
	if err != nil {
		t.Fatal(err)
	}
	calls, answers = replayedTools(t, got.Messages)
	if len(calls) != 1 || calls[0][0] != "" || !slices.Equal(answers, []string{""}) {
		t.Errorf("client-answered call replayed as %q answered by %q, want its empty id kept:\n%s", calls, answers, got.Messages)
	}
}
