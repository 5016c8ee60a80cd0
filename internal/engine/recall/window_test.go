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
			got, cut := newQueryMatcher(tt.query).window(text, hitWindowBytes, false)
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
	if got, cut := newQueryMatcher("free").window("short and free", 100, false); got != "short and free" || cut {
		t.Fatalf("a short text = %q (cut %v), want it whole", got, cut)
	}
}

// TestWindowAtEnd: the window of a turn said before a hit holds the
// sentences that match the query when some do, as any window, and its
// last sentences when none does, led by an ellipsis and not followed by
// one.
func TestWindowAtEnd(t *testing.T) {
	last := "So, shall I book the table for Friday?"
	text := filler("opening", 12) + "I only have weekends free. " + filler("closing", 12) + last
	tests := []struct {
		name, query string
		want        string // a sentence the window holds
		cut         bool   // text goes on after the window
	}{
		{"no word matches: the end", "zebra quantum", last, false},
		{"no query: the end", "", last, false},
		{"a matching sentence wins", "when am I free?", "I only have weekends free.", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, cut := newQueryMatcher(tt.query).window(text, maxNeighbourBytes, true)
			if !strings.Contains(got, tt.want) || !strings.HasPrefix(got, "… ") || cut != tt.cut {
				t.Fatalf("window %q (cut %v): want it to hold %q, lead with an ellipsis, cut %v", got, cut, tt.want, tt.cut)
			}
			if len(got) > maxNeighbourBytes+len("… ") {
				t.Fatalf("window of %d bytes, want at most %d", len(got), maxNeighbourBytes+len("… "))
			}
		})
	}
}

// TestPassageOfALongReplyIsCut: a hit in a long reply with long turns
// around it makes a passage of the part that matched and the sides of its
// neighbours nearest it (the end of the turn before, the start of the turn
// after), a fraction of the turns' length, so more hits fit a share.
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
	before, _, _ := strings.Cut(p, "\nassistant: ")
	if !strings.HasPrefix(before, "user: … ") || !strings.HasSuffix(before, "The question paragraph number 19 goes on about the weather and the roads.") {
		t.Fatalf("the turn before the hit does not show its end: %q", before)
	}
	if !strings.Contains(p, "\nuser: The answer paragraph number 0") || !strings.HasSuffix(p, ellipsis) {
		t.Fatalf("the turn after the hit does not show its start: %q", p)
	}
}

// TestBeforeHit: a turn around hits shows its end when the nearest hit is
// after it, its start when the nearest is before it or both are as near.
func TestBeforeHit(t *testing.T) {
	run := func(hits ...int) []turn {
		r := make([]turn, 7)
		for _, h := range hits {
			r[h].hitRank = 1
		}
		return r
	}
	tests := []struct {
		name    string
		run     []turn
		j, last int
		want    bool
	}{
		{"the turn before the only hit", run(3), 2, -1, true},
		{"the turn after the only hit", run(3), 4, 3, false},
		{"between two hits, as near each", run(1, 3), 2, 1, false},
		{"nearer the hit after", run(0, 4), 3, 0, true},
		{"nearer the hit before", run(2, 6), 3, 2, false},
		{"no hit after", run(0), 1, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := beforeHit(tt.run, tt.j, tt.last); got != tt.want {
				t.Fatalf("beforeHit = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestQueryMatcherScore states what a passage's share of the query counts:
// the distinct query words a text holds, matched whole or by their first
// five letters, in any case, a stopword only when the text has no other
// word (as memory.QueryTerms reads a text).
func TestQueryMatcherScore(t *testing.T) {
	tests := []struct {
		query, text string
		want        int
	}{
		{"allergic to shellfish", "I'm ALLERGIC to Shellfish!", 2},
		{"allergic to shellfish", "allergies: shellfish, shellfish again", 2},
		{"allergic", "allerg alle", 1}, // five letters in common; four are not enough
		{"weekends free", "free free free", 1},
		{"ações minha", "as ações", 1},
		{"the", "the cat", 0},  // a stopword counts only in a text of stopwords
		{"the", "the a of", 1}, // (a query of stopwords alone keeps them)
		{"porto", "", 0},
		{"", "porto", 0},
		{"日本語 café", "日本語, CAFÉ", 2},
	}
	for _, tt := range tests {
		if got := newQueryMatcher(tt.query).score(tt.text); got != tt.want {
			t.Errorf("score(%q) for %q = %d, want %d", tt.text, tt.query, got, tt.want)
		}
	}
}
