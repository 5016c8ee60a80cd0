package recall

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// filler is n sentences of prose that names nothing a test asks about.
func filler(tag string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "The %s paragraph number %d goes on about the weather and the roads. ", tag, i)
	}
	return b.String()
}

func TestWindowShowsThePartThatMatched(t *testing.T) {
	needle := "By the way I only have weekends free for the course."
	text := filler("opening", 12) + needle + " " + filler("closing", 12)
	tests := []struct {
		name, query string
		want        string // a sentence the window holds
		lead        bool   // the window starts past the text's start
	}{
		{"the matching sentence, in the middle", "when am I free for a course?", needle, true},
		{"another form of a query word", "which weekend suits the courses", needle, true},
		{"no query: the start", "", "The opening paragraph number 0", false},
		{"no word matches: the start", "zebra quantum", "The opening paragraph number 0", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, cut := newQueryMatcher(tt.query).window(text, hitWindowBytes)
			if len(got) > hitWindowBytes+len("… ") || !cut {
				t.Fatalf("window of %d bytes (cut %v), want at most %d and cut", len(got), cut, hitWindowBytes)
			}
			if !strings.Contains(got, tt.want) {
				t.Fatalf("window %q lacks %q", got, tt.want)
			}
			if strings.HasPrefix(got, "…") != tt.lead {
				t.Fatalf("window %q: leading ellipsis %v, want %v", got, !tt.lead, tt.lead)
			}
		})
	}
	if got, cut := newQueryMatcher("free").window("short and free", 100); got != "short and free" || cut {
		t.Fatalf("a short text = %q (cut %v), want it whole", got, cut)
	}
}

// TestPassageOfALongReplyIsCut: a hit in a long reply with long turns
// around it makes a passage of the part that matched and the start of its
// neighbours, a fraction of the turns' length, so more hits fit a share.
func TestPassageOfALongReplyIsCut(t *testing.T) {
	reply := filler("reply", 10) + "Since you are allergic to shellfish, skip the paella and take the mushroom risotto. " + filler("more", 10)
	f := &fakeContext{msgs: []memory.Message{
		{Conversation: "c", Seq: 1, Key: "k1", Role: "user", Content: filler("question", 20)},
		{Conversation: "c", Seq: 2, Key: "k2", Role: "assistant", Content: reply},
		{Conversation: "c", Seq: 3, Key: "k3", Role: "user", Content: filler("answer", 20)},
	}}
	got, err := expand(context.Background(), f, nil, "t", "u", []memory.Item{
		{Kind: KindMessage, Conversation: "c", Ref: "k2", Text: reply, Score: 1}}, 1, "what should I avoid eating, given my shellfish allergy?")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("passages %+v", got)
	}
	p := got[0].Text
	whole := 0
	for _, m := range f.msgs {
		whole += len(m.Content)
	}
	if !strings.Contains(p, "allergic to shellfish, skip the paella") {
		t.Fatalf("the passage lacks the part that matched: %q", p)
	}
	if len(p) > hitWindowBytes+2*maxNeighbourBytes+64 || len(p) > whole/2 {
		t.Fatalf("passage of %d bytes for turns of %d: want the part that matched and trimmed neighbours", len(p), whole)
	}
	if !strings.Contains(p, "user: The question paragraph number 0") || !strings.Contains(p, "user: The answer paragraph number 0") {
		t.Fatalf("the neighbours' starts are missing: %q", p)
	}
}
