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

func TestBM25Rank(t *testing.T) {
	docs := []string{
		"Hey Leo, thanks!",                                   // 0: names and chit-chat
		"Leo, the new puppy chewed my shoe",                  // 1
		"we finally named the new puppy Biscuit",             // 2
		"Thanks Leo, the puppy is fine",                      // 3
		"Leo Leo Leo Leo",                                    // 4: a name repeated
		"we finally named the new puppy Biscuit and the cat", // 5: longer, same words
	}
	x := NewBM25(docs)
	got := x.Rank("What was the new puppy named, Leo?")
	if len(got) == 0 || got[0] != 2 {
		t.Fatalf("rank = %v, want document 2 first", got)
	}
	pos := func(d int) int {
		for i, v := range got {
			if v == d {
				return i
			}
		}
		return -1
	}
	if pos(5) < pos(2) {
		t.Errorf("the longer document 5 outranks 2: %v", got)
	}
	if pos(4) < pos(1) {
		t.Errorf("a document of names outranks one about the puppy: %v", got)
	}
	if r := x.Rank("octopus"); len(r) != 0 {
		t.Errorf("rank for an unknown word = %v, want none", r)
	}
}

func TestPackStaysWithinBudget(t *testing.T) {
	c := mustCounter(t)
	const model = "gpt-4o-mini"
	system := []json.RawMessage{msg("system", "You are a helpful assistant.")}
	q := msg("user", "what did I say about the puppy?")
	var passages []string
	var ranked []int
	for i := range 300 {
		passages = append(passages, fmt.Sprintf("[2023-03-%02d] Maya: passage number %d about the puppy and the park", 1+i%28, i))
		ranked = append(ranked, 299-i)
	}
	for _, budget := range []int{50, 500, 2000, 4000} {
		out := Pack(c, model, system, q, passages, ranked, budget, "Relevant earlier messages:")
		n := c.Messages(model, out)
		if n > budget && len(out) > 2 {
			t.Fatalf("budget %d: %d tokens", budget, n)
		}
		if budget >= 2000 && n < budget*9/10 {
			t.Errorf("budget %d: only %d tokens used", budget, n)
		}
		if budget >= 500 && (len(out) != 3 || !json.Valid(out[1])) {
			t.Fatalf("budget %d: %d messages", budget, len(out))
		}
	}
}
