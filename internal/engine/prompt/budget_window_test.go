package prompt

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// windowTurns returns n alternating user and assistant messages, Seq
// their index.
func windowTurns(n int) []memory.Message {
	out := make([]memory.Message, n)
	for i := range out {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		out[i] = memory.Message{Role: role, Content: fmt.Sprint(i), Seq: int64(i)}
	}
	return out
}

// shownTurn is a turn of a window and whether its block is shown.
type shownTurn struct {
	seq   int64
	block bool
}

func shownOf(kept []memory.Message, from int, block func(memory.Message) int) []shownTurn {
	out := make([]shownTurn, len(kept))
	for i, m := range kept {
		out[i] = shownTurn{m.Seq, i >= from && block(m) > 0}
	}
	return out
}

// TestRecentWindowDropsBlocksFirst: when the turns and their blocks
// outgrow the window, the oldest blocks leave, down to the low watermark,
// and every turn stays.
func TestRecentWindowDropsBlocksFirst(t *testing.T) {
	msgs := windowTurns(4)
	cost := func(memory.Message) int { return 10 }
	block := func(m memory.Message) int {
		if m.Role == "user" {
			return 40
		}
		return 0
	}
	// 50, 60, 110 > 100: the first block goes (70 <= 70), then 80.
	kept, from, spent := recentWindow(msgs, cost, block, 100, 1000)
	want := []shownTurn{{0, false}, {1, false}, {2, true}, {3, false}}
	if got := shownOf(kept, from, block); !slices.Equal(got, want) || spent != 80 {
		t.Errorf("shown %v, spent %d; want %v, 80", got, spent, want)
	}
}

// TestRecentWindowMovesInSteps: as a chat grows turn by turn, with or
// without blocks, each request's window either extends the previous one's (the same turns and
// blocks, then the new ones: the previous prompt repeats) or is cut, and
// a cut leaves at most the low watermark: blocks and turns leave several
// at once, never one per turn.
func TestRecentWindowMovesInSteps(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 100 {
		msgs := windowTurns(60)
		costs, blocks := map[int64]int{}, map[int64]int{}
		for _, m := range msgs {
			costs[m.Seq] = 5 + r.IntN(40)
			if m.Role == "user" && round%2 == 1 && r.IntN(3) == 0 { // even rounds: no blocks
				blocks[m.Seq] = 50 + r.IntN(300)
			}
		}
		cost := func(m memory.Message) int { return costs[m.Seq] }
		block := func(m memory.Message) int { return blocks[m.Seq] }
		const window = 800
		low := int(windowLow * window)
		var prev []shownTurn
		cuts := 0
		for n := 1; n <= len(msgs); n++ {
			kept, from, spent := recentWindow(msgs[:n], cost, block, window, 1<<30)
			cur := shownOf(kept, from, block)
			if spent > window {
				t.Fatalf("round %d, %d turns: spent %d over the window %d", round, n, spent, window)
			}
			if len(cur) < len(prev) || !slices.Equal(cur[:len(prev)], prev) {
				cuts++
				if last := cost(msgs[n-1]) + block(msgs[n-1]); spent > max(low, last) {
					t.Fatalf("round %d, %d turns: a cut left %d, over the low watermark %d", round, n, spent, low)
				}
			}
			prev = cur
		}
		if cuts == 0 {
			t.Fatalf("round %d: the window was never cut; the test proves nothing", round)
		}
	}
}
