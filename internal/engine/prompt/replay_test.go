package prompt

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// Tool messages of TestReplayable.
const (
	rCall0    = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}}]}`
	rRes0     = `{"role":"tool","tool_call_id":"call_0","content":"18C"}`
	rTwice    = `{"role":"assistant","content":null,"tool_calls":[{"id":"x","type":"function","function":{"name":"a","arguments":"{}"}},{"id":"x","type":"function","function":{"name":"b","arguments":"{}"}}]}`
	rResX     = `{"role":"tool","tool_call_id":"x","content":"one"}`
	rResX2    = `{"role":"tool","tool_call_id":"x","content":"two"}`
	rNoID     = `{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"weather","arguments":"{}"}},{"id":"","type":"function","function":{"name":"time","arguments":"{}"}}]}`
	rNoIDRes  = `{"role":"tool","content":"18C"}`
	rNoIDRes2 = `{"role":"tool","tool_call_id":"","content":"14:00"}`
	rString   = `{"role":"assistant","content":"hm","tool_calls":"oops"}`
	rNumber   = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function"},5]}`
	rNull     = `{"role":"assistant","content":null,"tool_calls":[null,{"type":"function","function":{"name":"time","arguments":"{}"}}]}`
	rUpper    = `{"role":"assistant","content":null,"TOOL_CALLS":[{"ID":"call_0","type":"function"}]}`
	rMixed    = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function"},{"id":"call_9","type":"function"}]}`
	rRes9     = `{"role":"tool","tool_call_id":"call_9","content":"nine"}`
	rUser     = `{"role":"user","content":"And now?"}`
)

// S(i,k) in a want of TestReplayable stands for the synthetic id of the
// k-th call of stored message i.
func expandSynthetic(s string, stored []memory.Message) string {
	for i, m := range stored {
		for k := range 3 {
			s = strings.ReplaceAll(s, fmt.Sprintf("S(%d,%d)", i, k), syntheticCallID(m, k))
		}
	}
	return s
}

// storedMsgs returns raws as stored messages keyed as keyed does: parsed,
// or, for JSON memory.ParseMessage refuses (stored before a check, or by
// another version), with only their role and Raw.
func storedMsgs(tb testing.TB, raws ...string) []memory.Message {
	tb.Helper()
	out := make([]memory.Message, len(raws))
	for i, raw := range raws {
		m, err := memory.ParseMessage(json.RawMessage(raw))
		if err != nil {
			var r struct{ Role string }
			if err := json.Unmarshal([]byte(raw), &r); err != nil {
				tb.Fatalf("stored message %s: %v", raw, err)
			}
			m = memory.Message{Role: r.Role, Raw: json.RawMessage(raw)}
		}
		out[i] = m
	}
	return keyed("ex", out)
}

// TestReplayable pins what replayable makes of stored turns, with the
// client's messages (rest): a tool call stored without an id gets one
// (the same on every request) and its results with it; a call whose id a
// newer call — stored, or the client's own — also has is renamed with its
// results; and only what keeps the tool-call protocol is replayed: system
// messages, results whose call is missing or not kept, and calls not
// every one of which is answered (by stored results, or, for the last
// stored message, by the client's leading results) are dropped.
// tool_calls that are not an array of objects count as no calls. A
// rewritten message is written again with its keys sorted. S(i,k) is the
// synthetic id of the k-th call of stored message i. Neither the stored
// messages nor the client's are changed.
func TestReplayable(t *testing.T) {
	const (
		callOneNoID = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function"},{"type":"function"}]}`
	)
	tests := []struct {
		name         string
		stored, rest []string
		noKeys       bool // stored without keys: S(i,k) hashes sequence number and JSON
		want         []string
	}{
		{name: "plain turns", stored: []string{u1, a1}, rest: []string{uNew}, want: []string{u1, a1}},
		{name: "system message skipped", stored: []string{sys, u1, a1}, rest: []string{uNew}, want: []string{u1, a1}},
		{name: "result before any call", stored: []string{toolStray, u2, a2}, rest: []string{uNew}, want: []string{u2, a2}},
		{name: "result answering another call", stored: []string{u2, aCall, tool1, tool2, toolStray, a2}, rest: []string{uNew},
			want: []string{u2, aCall, tool1, tool2, a2}},
		{name: "call half answered dropped with its result", stored: []string{u2, aCall, tool1, a2, u1, a1}, rest: []string{uNew},
			want: []string{u2, a2, u1, a1}},
		{name: "id repeated across turns", stored: []string{u2, rCall0, rRes0, a2, u2, rCall0, rRes0, a2}, rest: []string{uNew},
			want: []string{
				u2,
				`{"content":null,"role":"assistant","tool_calls":[{"function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"},"id":"S(1,0)","type":"function"}]}`,
				`{"content":"18C","role":"tool","tool_call_id":"S(1,0)"}`,
				a2, u2, rCall0, rRes0, a2,
			}},
		{name: "id repeated across turns, stored without keys", noKeys: true,
			stored: []string{u2, rCall0, rRes0, a2, u2, rCall0, rRes0, a2}, rest: []string{uNew},
			want: []string{
				u2,
				`{"content":null,"role":"assistant","tool_calls":[{"function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"},"id":"S(1,0)","type":"function"}]}`,
				`{"content":"18C","role":"tool","tool_call_id":"S(1,0)"}`,
				a2, u2, rCall0, rRes0, a2,
			}},
		{name: "id repeated within a message", stored: []string{u2, rTwice, rResX, rResX2, a2}, rest: []string{uNew},
			want: []string{
				u2,
				`{"content":null,"role":"assistant","tool_calls":[{"function":{"name":"a","arguments":"{}"},"id":"S(1,0)","type":"function"},{"function":{"name":"b","arguments":"{}"},"id":"x","type":"function"}]}`,
				`{"content":"one","role":"tool","tool_call_id":"S(1,0)"}`,
				rResX2, a2,
			}},
		{name: "tool_calls a string", stored: []string{u2, rString, rRes0, a2}, rest: []string{uNew},
			want: []string{u2, rString, a2}},
		{name: "tool_calls holding a number", stored: []string{u2, rNumber, rRes0, a2}, rest: []string{uNew},
			want: []string{u2, rNumber, a2}},
		{name: "tool_calls holding null, not rewritable", stored: []string{u2, rNull, rNoIDRes, rNoIDRes2, a2}, rest: []string{uNew},
			want: []string{u2, rNull, rNoIDRes, rNoIDRes2, a2}},
		{name: "calls without id", stored: []string{u2, rNoID, rNoIDRes, rNoIDRes2, a2, u2, rCall0, rRes0, a2}, rest: []string{uNew},
			want: []string{
				u2,
				`{"content":null,"role":"assistant","tool_calls":[{"function":{"name":"weather","arguments":"{}"},"id":"S(1,0)","type":"function"},{"function":{"name":"time","arguments":"{}"},"id":"S(1,1)","type":"function"}]}`,
				`{"content":"18C","role":"tool","tool_call_id":"S(1,0)"}`,
				`{"content":"14:00","role":"tool","tool_call_id":"S(1,1)"}`,
				a2, u2, rCall0, rRes0, a2,
			}},
		{name: "call without id and repeated id in one message",
			stored: []string{u2, callOneNoID, rRes0, rNoIDRes, a2, u2, rCall0, rRes0, a2}, rest: []string{uNew},
			want: []string{
				u2,
				`{"content":null,"role":"assistant","tool_calls":[{"id":"S(1,0)","type":"function"},{"id":"S(1,1)","type":"function"}]}`,
				`{"content":"18C","role":"tool","tool_call_id":"S(1,0)"}`,
				`{"content":"18C","role":"tool","tool_call_id":"S(1,1)"}`,
				a2, u2, rCall0, rRes0, a2,
			}},
		{name: "last calls without id answered by the client", stored: []string{u2, rNoID}, rest: []string{rNoIDRes, rNoIDRes2},
			want: []string{u2, rNoID}},
		{name: "last calls without id half answered", stored: []string{u2, rNoID, rNoIDRes}, rest: []string{uNew},
			want: []string{u2}},
		{name: "client's own call has a stored id", stored: []string{u2, rCall0, rRes0, a2}, rest: []string{rUser, rCall0, rRes0},
			want: []string{
				u2,
				`{"content":null,"role":"assistant","tool_calls":[{"function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"},"id":"S(1,0)","type":"function"}]}`,
				`{"content":"18C","role":"tool","tool_call_id":"S(1,0)"}`,
				a2,
			}},
		{name: "client answers the last stored call", stored: []string{u2, rCall0, rRes0, a2, u2, rCall0}, rest: []string{rRes0},
			want: []string{
				u2,
				`{"content":null,"role":"assistant","tool_calls":[{"function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"},"id":"S(1,0)","type":"function"}]}`,
				`{"content":"18C","role":"tool","tool_call_id":"S(1,0)"}`,
				a2, u2, rCall0,
			}},
		{name: "client answers the last stored call and makes one with its id", stored: []string{u2, rCall0},
			rest: []string{rRes0, rUser, rCall0, rRes0}, want: []string{u2, rCall0}},
		{name: "last stored call unanswered", stored: []string{u1, a1, u2, rCall0}, rest: []string{uNew}, want: []string{u1, a1, u2}},
		{name: "keys in upper case", stored: []string{u2, rUpper, rRes0, a2, u2, rCall0, rRes0, a2}, rest: []string{uNew},
			want: []string{
				u2,
				`{"TOOL_CALLS":[{"id":"S(1,0)","type":"function"}],"content":null,"role":"assistant"}`,
				`{"content":"18C","role":"tool","tool_call_id":"S(1,0)"}`,
				a2, u2, rCall0, rRes0, a2,
			}},
		{name: "one call of two renamed", stored: []string{u2, rMixed, rRes0, rRes9, a2, u2, rCall0, rRes0, a2}, rest: []string{uNew},
			want: []string{
				u2,
				`{"content":null,"role":"assistant","tool_calls":[{"id":"S(1,0)","type":"function"},{"id":"call_9","type":"function"}]}`,
				`{"content":"18C","role":"tool","tool_call_id":"S(1,0)"}`,
				rRes9, a2, u2, rCall0, rRes0, a2,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stored, rest := storedMsgs(t, tt.stored...), storedMsgs(t, tt.rest...)
			if tt.noKeys {
				for i := range stored {
					stored[i].Key = ""
				}
			}
			want := make([]string, len(tt.want))
			for i, w := range tt.want {
				want[i] = expandSynthetic(w, stored)
			}
			for range 2 { // the same on every request
				var got []string
				for _, m := range replayable(stored, rest, false) {
					got = append(got, string(m.Raw))
				}
				if !slices.Equal(got, want) {
					t.Fatalf("replayable =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			}
			for i, m := range stored {
				if string(m.Raw) != tt.stored[i] {
					t.Errorf("stored message %d changed to %s", i, m.Raw)
				}
			}
			for i, m := range rest {
				if string(m.Raw) != tt.rest[i] {
					t.Errorf("client message %d changed to %s", i, m.Raw)
				}
			}
		})
	}
}
