package baseline

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/memgate/memgate/internal/tokens"
)

func msg(role, content string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"role": role, "content": content})
	return b
}

func mustCounter(tb testing.TB) *tokens.Counter {
	tb.Helper()
	c, err := tokens.New(nil)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func TestTruncate(t *testing.T) {
	c := mustCounter(t)
	const model = "gpt-4o-mini"
	system := []json.RawMessage{msg("system", "You are a helpful assistant.")}
	var history []json.RawMessage
	for i := range 40 {
		history = append(history, msg("user", fmt.Sprintf("question number %d about something ordinary", i)),
			msg("assistant", fmt.Sprintf("answer number %d with a few more words in it than the question", i)))
	}
	q := msg("user", "what did I say?")
	full := Full(system, history, q)
	fixed := c.Messages(model, []json.RawMessage{system[0], q})
	tests := []struct {
		name   string
		budget int
	}{
		{"only fixed parts fit", fixed},
		{"below fixed parts", fixed - 5},
		{"a few turns", 200},
		{"many turns", 800},
		{"everything", c.Messages(model, full) + 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Truncate(c, model, system, history, q, tt.budget)
			if string(got[0]) != string(system[0]) || string(got[len(got)-1]) != string(q) {
				t.Fatal("system or question dropped")
			}
			n := c.Messages(model, got)
			if n > tt.budget && len(got) > 2 {
				t.Fatalf("%d tokens over budget %d with %d messages", n, tt.budget, len(got))
			}
			kept := got[1 : len(got)-1]
			if len(kept) > 0 {
				if role(kept[0]) != "user" {
					t.Errorf("kept history starts with %s", role(kept[0]))
				}
				// The kept turns are the newest ones, in order.
				off := len(history) - len(kept)
				for i := range kept {
					if string(kept[i]) != string(history[off+i]) {
						t.Fatalf("kept message %d is not history[%d]", i, off+i)
					}
				}
			}
			// One more message would not have fit (unless all fit).
			if len(kept) < len(history) && len(kept) > 0 {
				prev := history[len(history)-len(kept)-1]
				if role(prev) == "user" && n+c.RawMessage(model, prev) <= tt.budget {
					t.Errorf("older user turn would still fit: %d + %d <= %d", n, c.RawMessage(model, prev), tt.budget)
				}
			}
			if tt.name == "everything" && len(got) != len(full) {
				t.Errorf("budget above the full history kept %d of %d", len(got), len(full))
			}
		})
	}
}
