package enrich

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// TestDecisionSourcesReadEachMessageOnce: finding the message each of a
// summary's decisions was stated in reads the user messages once, not
// once per decision. A full-history request of 1,000 user messages
// (1.8 MB, each stating a decision) gave the extractive summary 100
// decisions, and finding their messages took 7 s of a core. Measured in
// allocations, which grow with the text read: 100 decisions must cost
// about what one does, not a hundred times as much.
func TestDecisionSourcesReadEachMessageOnce(t *testing.T) {
	filler := strings.Repeat("lorem ipsum dolorem sitamet consectetur adipiscing elitsed tempor ", 20)
	var msgs []memory.Message
	var decisions []string
	for i := range 100 {
		d := fmt.Sprintf("I decided to cancel the gym membership %d.", i)
		msgs = append(msgs, memory.Message{Role: "user", Key: fmt.Sprintf("ex%d:0", i), Content: d + " " + filler},
			memory.Message{Role: "assistant", Key: fmt.Sprintf("ex%d:1", i), Content: filler})
		decisions = append(decisions, d)
	}
	kept, got := usersDecisions(decisions, msgs)
	if len(kept) != len(decisions) {
		t.Fatalf("%d of %d decisions grounded in the user's messages, want all", len(kept), len(decisions))
	}
	for i, key := range got {
		if want := fmt.Sprintf("ex%d:0", i); key != want {
			t.Fatalf("decision %d stated in %q, want %q", i, key, want)
		}
	}
	one := testing.AllocsPerRun(3, func() { usersDecisions(decisions[:1], msgs) })
	all := testing.AllocsPerRun(3, func() { usersDecisions(decisions, msgs) })
	if all > 3*one {
		t.Fatalf("sources of 100 decisions allocate %.0f times, of one %.0f: each decision reads every message again", all, one)
	}
}

// sourcesIn returns the key of the user message of msgs each decision is
// stated in (statedBy), "" for none.
func sourcesIn(decisions []string, msgs []memory.Message) []string {
	users := userStems(msgs)
	out := make([]string, len(decisions))
	for i, d := range decisions {
		out[i] = statedBy(d, users)
	}
	return out
}
