package inject

import "github.com/memgate/memgate/internal/memory"

// unit is a run of messages kept or dropped together: a single message, or an
// assistant message with tool calls followed by the tool messages answering
// it, so the upstream never sees an orphan tool result.
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
			for j < len(msgs) && msgs[j].Role == "tool" {
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
	for len(kept) > 0 && kept[0].Role == "tool" {
		spent -= cost(kept[0])
		kept = kept[1:]
	}
	return kept, spent
}
