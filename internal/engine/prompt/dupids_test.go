package prompt

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// replay prepares a new-only client's request of raws over stored and
// returns the prompt's messages.
func replay(t *testing.T, stored []memory.Message, raws ...string) []json.RawMessage {
	t.Helper()
	a := New(&fakeHistory{msgs: stored}, byteCounter{}, Options{RecentMessages: 50}, nil)
	got, err := a.Prepare(context.Background(), request(t, memory.ModeOn, raws...))
	if err != nil {
		t.Fatal(err)
	}
	return got.Messages
}

// distinct reports whether ids holds no id twice.
func distinct(ids []string) bool {
	return len(slices.Compact(slices.Sorted(slices.Values(ids)))) == len(ids)
}

// TestRepeatedToolCallIDsAreMadeDistinct: a provider that numbers its tool
// calls per response ("call_0" on every turn) leaves stored turns whose
// calls share an id. Replayed together, Anthropic refuses the request
// (tool_use ids must be unique), the Responses API refuses the repeated
// call_id, chat pairs a result with the wrong call: every later request
// of the conversation fails. The older copies are renamed, their results
// with them; the newest — here the stored call the client's own result
// answers — keeps its id, so the client's pair still matches; the
// client's messages are never changed. A renamed id is the same on every
// request and stays when turns are added after it (the prompt's prefix
// stays cacheable).
func TestRepeatedToolCallIDsAreMadeDistinct(t *testing.T) {
	const (
		call0 = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function","function":{"name":"weather","arguments":"{}"}}]}`
		res0  = `{"role":"tool","tool_call_id":"call_0","content":"18C"}`
		two   = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function","function":{"name":"weather","arguments":"{}"}},{"id":"call_1","type":"function","function":{"name":"time","arguments":"{}"}}]}`
		res1  = `{"role":"tool","tool_call_id":"call_1","content":"14:00"}`
		mine  = `{"role":"tool","tool_call_id":"call_0","content":"19C"}`
	)
	stored := keyed("ex-1", msgs(t, u2, call0, res0, a2))
	stored = append(stored, keyed("ex-2", msgs(t, u2, two, res0, res1, a2))...)
	stored = append(stored, keyed("ex-3", msgs(t, u2, call0))...)

	// The client answers the newest stored call, call_0, with its own
	// result.
	first := replay(t, stored, mine)
	calls, answers := replayedTools(t, first)
	ids := slices.Concat(calls...)
	if len(calls) != 3 || len(ids) != 4 || len(answers) != 4 {
		t.Fatalf("replayed calls %q and answers %q, want the three tool units whole:\n%s", calls, answers, first)
	}
	if !distinct(ids) {
		t.Errorf("tool call ids %q are not distinct", ids)
	}
	if !slices.Equal(ids, answers) {
		t.Errorf("results answer %q, calls are %q: want each result paired with its call", answers, ids)
	}
	if calls[2][0] != "call_0" || string(first[len(first)-1]) != mine {
		t.Errorf("the client's pair changed: call %q, its result %s", calls[2][0], first[len(first)-1])
	}
	if calls[1][1] != "call_1" {
		t.Errorf("call_1, used once, was renamed to %q", calls[1][1])
	}
	if again := replay(t, stored, mine); !slices.EqualFunc(first, again, func(a, b json.RawMessage) bool { return string(a) == string(b) }) {
		t.Errorf("the replay differs between two requests:\n%s\n%s", first, again)
	}
	if string(stored[1].Raw) != call0 || string(stored[2].Raw) != res0 {
		t.Errorf("stored messages changed: %s %s", stored[1].Raw, stored[2].Raw)
	}

	// The turn is stored and the client asks on: the ids the older turns
	// were replayed with are the same.
	later := append(slices.Clone(stored), keyed("ex-4", msgs(t, mine, a2))...)
	next := replay(t, later, uNew)
	nextCalls, nextAnswers := replayedTools(t, next)
	if !slices.EqualFunc(nextCalls, calls, slices.Equal) || !slices.Equal(nextAnswers, answers) {
		t.Errorf("the next request replays calls %q answered by %q, want %q answered by %q", nextCalls, nextAnswers, calls, answers)
	}
}

// TestRepeatedToolCallIDInOneMessage: a provider giving every call one
// fixed id sends a message whose calls share it; the results that follow
// answer them in order. Each call and its result get an id of their own.
func TestRepeatedToolCallIDInOneMessage(t *testing.T) {
	const (
		fixed = `{"role":"assistant","content":null,"tool_calls":[{"id":"fixed","type":"function","function":{"name":"weather","arguments":"{}"}},{"id":"fixed","type":"function","function":{"name":"time","arguments":"{}"}}]}`
		resA  = `{"role":"tool","tool_call_id":"fixed","content":"18C"}`
		resB  = `{"role":"tool","tool_call_id":"fixed","content":"14:00"}`
	)
	got := replay(t, keyed("ex-1", msgs(t, u2, fixed, resA, resB, a2)), uNew)
	calls, answers := replayedTools(t, got)
	if len(calls) != 1 || len(calls[0]) != 2 || !distinct(calls[0]) || !slices.Equal(calls[0], answers) {
		t.Fatalf("replayed calls %q answered by %q, want two distinct ids, each answered in order:\n%s", calls, answers, got)
	}
	var res []string
	for _, raw := range got {
		var m struct{ Role, Content string }
		if json.Unmarshal(raw, &m) == nil && m.Role == "tool" {
			res = append(res, m.Content)
		}
	}
	if !slices.Equal(res, []string{"18C", "14:00"}) {
		t.Errorf("results %q, want 18C then 14:00", res)
	}
}
