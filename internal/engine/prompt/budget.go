package prompt

import "github.com/memgate/memgate/internal/memory"

// unit is a run of messages kept or dropped together: a single message, or an
// assistant message followed by the results answering its calls (tool
// messages, a legacy function call's function message: memory.IsResult),
// so the upstream never sees an orphan result.
type unit struct {
	start, end int // msgs[start:end]
	cost       int
}

// units groups msgs into units, computing each unit's cost.
func units(msgs []memory.Message, cost func(memory.Message) int) []unit {
	var out []unit
	for i := 0; i < len(msgs); {
		j := i + 1
		if msgs[i].Role == "assistant" {
			for j < len(msgs) && memory.IsResult(msgs[j].Role) {
				j++
			}
		}
		u := unit{start: i, end: j}
		for k := i; k < j; k++ {
			u.cost += cost(msgs[k])
		}
		out = append(out, u)
		i = j
	}
	return out
}

// fitNewest returns the longest suffix of msgs, in order, whose cost fits in
// budget, never splitting a tool-call unit and never starting with a tool
// message whose assistant call was cut off. It also returns the cost spent.
func fitNewest(msgs []memory.Message, cost func(memory.Message) int, budget int) ([]memory.Message, int) {
	us := units(msgs, cost)
	spent := 0
	first := len(msgs)
	for i := len(us) - 1; i >= 0; i-- {
		if spent+us[i].cost > budget {
			break
		}
		spent += us[i].cost
		first = us[i].start
	}
	kept := msgs[first:]
	// A leading tool message (its assistant call lies before the window, e.g.
	// when history was loaded from the middle of a unit) is an orphan.
	for len(kept) > 0 && memory.IsResult(kept[0].Role) {
		spent -= cost(kept[0])
		kept = kept[1:]
	}
	return kept, spent
}

// anchorStride is the grain of historyAnchor: a full-history client's
// window is replayed from a multiple of it, which stays put while the
// chat grows by that many messages.
const anchorStride = 1024

// historyAnchor returns where recentWindow replays a full-history client's
// resent turns msgs (oldest first) from: a place before every turn that
// could be sent within budget (the turns after it cost more than budget
// on their own, so no window holds anything older), rounded down to a
// multiple of anchorStride and to the start of a unit, so that it stays
// put from request to request while the chat grows (recentWindow's
// stable place) and the window keeps its steps. 0 when every turn could
// fit. It counts the newest turns only, back to the budget: the work is
// what the prompt may use, not the client's history.
func historyAnchor(msgs []memory.Message, cost func(memory.Message) int, budget int) int {
	sum, t := 0, len(msgs)
	for t > 0 && sum <= budget {
		t--
		sum += cost(msgs[t])
	}
	if sum <= budget {
		return 0
	}
	r := t / anchorStride * anchorStride
	for r > 0 && memory.IsResult(msgs[r].Role) {
		r--
	}
	return r
}

// windowLow is the low watermark of the recent turns' window, as a
// fraction of its size: when the turns outgrow the window, the oldest are
// dropped until what is left fills at most this much of it.
const windowLow = 0.7

// recentWindow returns the turns of msgs (oldest first) to send as recent
// turns, each rendered with the recalled block it was sent with (block: a
// message's block cost, 0 for none; a block goes before its unit's first
// message), from which index of them on their blocks are shown, and what
// the turns and those blocks cost. It moves in steps, as compaction does:
// replaying the conversation unit by unit from msgs[0], whenever the units
// kept and their blocks outgrow window (the high watermark), the oldest
// blocks go first, down to windowLow of it, and only then, with no block
// left to drop, the oldest turns. So between two such cuts every request
// keeps the same first turn and blocks, and its prompt repeats the previous
// one's up to its newest turns; what a request recalled stays where it
// was, and blocks leave several at once. The result depends only on msgs
// and window, never on earlier requests: msgs[0] must be a stable place
// (the conversation's start, the summary's end, windowAnchor). What is
// kept is then trimmed, blocks before turns, oldest first, to fit limit
// (the tokens actually left) and never starts with a tool message whose
// call was cut off.
func recentWindow(msgs []memory.Message, cost, block func(memory.Message) int, window, limit int) ([]memory.Message, int, int) {
	us := units(msgs, cost)
	bc := make([]int, len(us))
	for i, u := range us {
		bc[i] = block(msgs[u.start])
	}
	low := int(windowLow * float64(max(window, 0)))
	// Units from s are kept; blocks are shown for units from b on (b >= s).
	s, b, sum := 0, 0, 0
	// shrink drops, while the sum exceeds to, blocks of units up to e,
	// oldest first, then units before e.
	shrink := func(e, to int) {
		for b < len(us) && b <= e && sum > to {
			sum -= bc[b]
			b++
		}
		for s < e && sum > to {
			sum -= us[s].cost
			if s >= b {
				sum -= bc[s]
				b = s + 1
			}
			s++
		}
	}
	for e := range us {
		sum += us[e].cost + bc[e]
		if sum > window {
			shrink(e, low)
		}
	}
	if sum > limit {
		shrink(len(us), limit)
	}
	first, from := len(msgs), len(msgs)
	if s < len(us) {
		first = us[s].start
	}
	if b < len(us) {
		from = us[b].start
	}
	kept := msgs[first:]
	for len(kept) > 0 && memory.IsResult(kept[0].Role) {
		sum -= cost(kept[0])
		kept = kept[1:]
		first++
	}
	return kept, max(from-first, 0), sum
}
