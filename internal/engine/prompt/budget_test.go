package prompt

import (
	"math/rand/v2"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

func lenCost(m memory.Message) int { return 4 + len(m.Content) }

// randomHistory builds a conversation with plain turns and tool-call units.
func randomHistory(r *rand.Rand, n int) []memory.Message {
	var out []memory.Message
	text := func() string { return string(make([]byte, r.IntN(60))) }
	for len(out) < n {
		switch r.IntN(4) {
		case 0:
			out = append(out, memory.Message{Role: "assistant", Content: "[tool_call f()]"})
			for k := 0; k <= r.IntN(3); k++ {
				out = append(out, memory.Message{Role: "tool", Content: text()})
			}
		case 1:
			out = append(out, memory.Message{Role: "assistant", Content: text()})
		default:
			out = append(out, memory.Message{Role: "user", Content: text()})
		}
	}
	for i := range out {
		out[i].Seq = int64(i + 1)
	}
	return out
}

// TestFitNewestProperties checks, for random histories (tool-call units
// included) and budgets, that the kept messages fit the budget, are a suffix
// in order, and never start with or contain an orphan tool message.
func TestFitNewestProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 2000; iter++ {
		msgs := randomHistory(r, r.IntN(40))
		// Sometimes start mid-unit, as a loaded window may.
		if len(msgs) > 2 && r.IntN(3) == 0 {
			msgs = msgs[r.IntN(len(msgs)):]
		}
		budget := r.IntN(600)
		kept, spent := fitNewest(msgs, lenCost, budget)
		total := 0
		for _, m := range kept {
			total += lenCost(m)
		}
		if total != spent || spent > budget {
			t.Fatalf("iter %d: spent %d (counted %d) over budget %d", iter, spent, total, budget)
		}
		if len(kept) > 0 {
			off := len(msgs) - len(kept)
			for i := range kept {
				if kept[i].Seq != msgs[off+i].Seq {
					t.Fatalf("iter %d: kept is not a suffix in order", iter)
				}
			}
			if kept[0].Role == "tool" {
				t.Fatalf("iter %d: starts with an orphan tool message", iter)
			}
		}
		for i, m := range kept {
			if m.Role != "tool" {
				continue
			}
			j := i
			for j > 0 && kept[j].Role == "tool" {
				j--
			}
			if kept[j].Role != "assistant" {
				t.Fatalf("iter %d: tool message %d has no assistant call before it", iter, i)
			}
		}
		// Maximality: the unit just before the kept suffix did not fit.
		if off := len(msgs) - len(kept); off > 0 && msgs[off-1].Role != "tool" {
			if spent+lenCost(msgs[off-1]) <= budget && msgs[off-1].Role != "assistant" {
				t.Fatalf("iter %d: message %d would have fit", iter, off-1)
			}
		}
	}
}

// TestFitNewestKeepsToolUnitTogether: a call and its results are kept or
// dropped together — tool results, and a legacy function call's role
// "function" result.
func TestFitNewestKeepsToolUnitTogether(t *testing.T) {
	for _, result := range []string{"tool", "function"} {
		msgs := []memory.Message{
			{Role: "user", Content: "weather?"},
			{Role: "assistant", Content: "[tool_call weather()]"},
			{Role: result, Content: "18C"},
			{Role: "assistant", Content: "It is 18C."},
		}
		costs := map[string]int{"weather?": 10, "[tool_call weather()]": 10, "18C": 10, "It is 18C.": 10}
		cost := func(m memory.Message) int { return costs[m.Content] }
		tests := []struct {
			budget int
			want   int
		}{{10, 1}, {15, 1}, {20, 1}, {30, 3}, {40, 4}, {0, 0}}
		for _, tt := range tests {
			kept, _ := fitNewest(msgs, cost, tt.budget)
			if len(kept) != tt.want {
				t.Errorf("%s, budget %d: kept %d messages, want %d", result, tt.budget, len(kept), tt.want)
			}
		}
		// A window loaded from the middle of the unit does not start
		// with the result.
		if kept, _ := fitNewest(msgs[2:], cost, 40); len(kept) != 1 {
			t.Errorf("%s: a window starting at the result kept %d messages, want 1", result, len(kept))
		}
	}
}
