package prompt

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// TestContinuationLeavesTheResentTurnToTheClient: the stored messages that
// go before a client's new ones leave out what the client resends — the
// stored tail it repeats, and the stored copy of the turn a tool loop
// resends (its question, then the client's own version of the call, as a
// client that regenerated the call or holds it otherwise than memgate
// stored it sends it): a stored question sent beside the client's reached
// the provider twice (Anthropic: joined into the client's message, every
// block of it, images included, given twice). A new-only client that
// says again what it said before still gets the earlier exchange.
func TestContinuationLeavesTheResentTurnToTheClient(t *testing.T) {
	msg := func(role, content string) memory.Message {
		raw, _ := json.Marshal(map[string]string{"role": role, "content": content})
		m, err := memory.ParseMessage(raw)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	call := func(id string) memory.Message {
		raw, _ := json.Marshal(map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
			map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city":"Lisbon"}`}}}})
		m, err := memory.ParseMessage(raw)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	result := func(id string) memory.Message {
		raw, _ := json.Marshal(map[string]any{"role": "tool", "tool_call_id": id, "content": "18C"})
		m, err := memory.ParseMessage(raw)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	earlier := []memory.Message{msg("user", "Hi"), msg("assistant", "Hello.")}
	q := msg("user", "Weather in Lisbon?")
	for _, tt := range []struct {
		name         string
		stored, rest []memory.Message
		want         int // stored messages kept, from the first
	}{
		{"tool loop resent as stored", append(earlier[:2:2], q, call("toolu_1")), []memory.Message{q, call("toolu_1"), result("toolu_1")}, 2},
		{"tool loop with the client's own call", append(earlier[:2:2], q, call("toolu_1")), []memory.Message{q, call("toolu_2"), result("toolu_2")}, 2},
		{"tool loop, its answer stored too", append(earlier[:2:2], q, call("toolu_1"), result("toolu_1"), msg("assistant", "18C.")), []memory.Message{q, call("toolu_9"), result("toolu_9")}, 2},
		{"new-only client says it again", append(earlier[:2:2], q, msg("assistant", "18C.")), []memory.Message{q}, 4},
		{"a question asked in an earlier turn", append(earlier[:2:2], q, msg("assistant", "18C."), msg("user", "Thanks"), msg("assistant", "Welcome.")), []memory.Message{q, call("toolu_2"), result("toolu_2")}, 6},
		{"retried message", append(earlier[:2:2], q), []memory.Message{q}, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := continuation(tt.stored, tt.rest, false)
			var names []string
			for _, m := range got {
				names = append(names, m.Role+":"+m.Content)
			}
			if len(got) != tt.want {
				t.Errorf("kept %d stored messages (%s), want the first %d", len(got), strings.Join(names, " | "), tt.want)
			}
		})
	}
}
