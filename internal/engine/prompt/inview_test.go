package prompt

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// passageOf returns a recalled passage of conversation conv around its hit
// turns, rendered as recall renders it (memory.PassageText).
func passageOf(conv, ref string, said time.Time, turns ...memory.PassageTurn) memory.Item {
	for i := range turns {
		turns[i].Whole = turns[i].Text
	}
	return memory.Item{Kind: "message", Ref: ref, Conversation: conv, Text: memory.PassageText(turns), Turns: turns, SaidAt: said}
}

// TestPassageShowsNoTurnInView covers recalled passages against the turns
// the prompt shows already: the request's own messages (a client that
// resends its history) and the recent turns memgate adds (one that sends
// only its newest). A passage shows none of them: a neighbour in view is
// trimmed from it, and a passage whose hit is in view is left out, so
// the next passage takes its place.
func TestPassageShowsNoTurnInView(t *testing.T) {
	day := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	const (
		adopted = "I adopted a dog named Rex from the shelter last spring."
		rex     = "Rex sounds lovely, a beagle mix is a great companion."
		pottery = "I signed up for a pottery class on Thursdays."
		glaze   = "The glaze I chose for the vase is a deep cobalt blue."
		other   = "My sister visits in June and we will hike the coast."
	)
	items := []memory.Item{
		// The hit is new; the question before it is in view.
		passageOf("c", "k2", day,
			memory.PassageTurn{Key: "k1", Role: "user", Text: adopted},
			memory.PassageTurn{Key: "k2", Role: "assistant", Text: rex, Hit: true}),
		// The hit is in view: only its neighbour is not.
		passageOf("c", "k3", day,
			memory.PassageTurn{Key: "k3", Role: "user", Text: pottery, Hit: true},
			memory.PassageTurn{Key: "k9", Role: "assistant", Text: glaze}),
		passageOf("old", "o1", day, memory.PassageTurn{Key: "o1", Role: "user", Text: other, Hit: true}),
	}
	g := &convGen{}
	var stored []memory.Message
	for i, text := range []string{adopted, "Nice!", pottery, "Fun."} {
		m := g.msg([]string{"user", "assistant"}[i%2], text)
		m.Seq, m.Key = int64(i+1), []string{"k1", "x1", "k3", "x2"}[i]
		stored = append(stored, m)
	}
	question := `{"role":"user","content":"What breed is my dog?"}`
	for _, tt := range []struct {
		name   string
		stored []memory.Message // the conversation's recent turns
		msgs   []string         // the request's
	}{
		{"full history", nil, []string{`{"role":"user","content":"` + adopted + `"}`, `{"role":"assistant","content":"Nice!"}`,
			`{"role":"user","content":"` + pottery + `"}`, `{"role":"assistant","content":"Fun."}`, question}},
		{"newest only", stored, []string{question}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a, err := NewAssembler(Deps{History: &fakeMemory{stored: tt.stored}, Recaller: fakeRecaller{memory.Recalled{Items: items}}, Counter: mustCounter(t)},
				Options{RecentMessages: 100, MaxContextTokens: 8000, CompletionReserve: 1024,
					Shares: Shares{Summary: 0.25, Pinned: 0.1, Facts: 0.1, Recall: 0.3}, Now: func() time.Time { return day }}, nil)
			if err != nil {
				t.Fatal(err)
			}
			req := request(t, memory.ModeOn, tt.msgs...)
			req.Model, req.Budget = "gpt-4o-mini", 4000
			p, err := a.Prepare(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			var block string
			for _, b := range p.Blocks {
				if !b.Stable {
					block = b.Text
				}
			}
			if !strings.Contains(block, "assistant: "+rex) || !strings.Contains(block, other) {
				t.Fatalf("the passages not in view are missing from the recalled block:\n%s", block)
			}
			for _, s := range []string{adopted, pottery, glaze} {
				if strings.Contains(block, s) {
					t.Fatalf("the recalled block shows %q, in view or around a hit in view:\n%s", s, block)
				}
			}
		})
	}
}
