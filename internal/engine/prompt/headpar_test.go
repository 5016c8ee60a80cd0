package prompt

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// startedHeads is a HeadReader that says when it is first asked.
type startedHeads struct {
	fakeHeads
	once    sync.Once
	started chan struct{}
}

func (s *startedHeads) HeadHeld(ctx context.Context, rev *memory.Revisions, id memory.Identity, n int) ([]memory.Held, error) {
	s.once.Do(func() { close(s.started) })
	return s.fakeHeads.HeadHeld(ctx, rev, id, n)
}

// TestPrepareReadsTheHeadWhileTheOtherPartsLoad: a full-history request
// whose user's facts hold one its conversation stated once reads the
// conversation's first messages for the edit check while the other parts
// load, not after them: recall here answers only once the head is asked
// for (or at its deadline, degraded). The check still works: an edit of
// the message that stated the fact leaves it out, with or without a
// summary.
func TestPrepareReadsTheHeadWhileTheOtherPartsLoad(t *testing.T) {
	stored := editChat(6)
	for i := range stored {
		stored[i].Key = fmt.Sprintf("x:%d", i)
	}
	stored[2].Content = "my phone is 555-0100"
	fact := memory.Fact{Type: memory.FactPreference, Key: "phone", Value: "555-0100", Pinned: true, Confidence: 1,
		Mentions: 1, Conversation: "c", Source: "x:2"}
	edited := slices.Clone(stored)
	edited[2].Content = "my phone is a secret"
	summary := &memory.Summary{Version: 1, FromSeq: 1, ToSeq: 2, Text: "THE SUMMARY", Summariser: memory.SummariserModel}
	for _, tc := range []struct {
		name    string
		summary *memory.Summary
		msgs    []memory.Message
		shown   bool
	}{
		{"no summary, resent unchanged", nil, stored, true},
		{"no summary, edited", nil, edited, false},
		{"a summary, edited", summary, edited, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			heads := &startedHeads{fakeHeads: fakeHeads{live: stored}, started: make(chan struct{})}
			rec := recallFunc(func(ctx context.Context, _ memory.RecallQuery) (memory.Recalled, error) {
				select {
				case <-heads.started:
					return memory.Recalled{}, nil
				case <-ctx.Done():
					return memory.Recalled{}, ctx.Err()
				}
			})
			mem := &fakeMemory{stored: stored, facts: []memory.Fact{fact}, summary: tc.summary}
			a, err := NewAssembler(Deps{History: mem, Summaries: mem, Facts: mem, Heads: heads, Recaller: rec, Counter: byteCounter{}},
				Options{RecentMessages: 8, MaxContextTokens: 8000, Shares: Shares{Summary: 0.2, Pinned: 0.1, Recall: 0.1},
					LoadTimeout: 5 * time.Second}, nil)
			if err != nil {
				t.Fatal(err)
			}
			p, err := a.Prepare(context.Background(), request(t, memory.ModeOn, rawTurns(tc.msgs, "next?")...))
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Degraded) != 0 {
				t.Fatalf("Degraded = %v: recall waited for a head read that followed it", p.Degraded)
			}
			if got := strings.Contains(joined(p), "phone: 555-0100"); got != tc.shown {
				t.Fatalf("pin shown = %v, want %v:\n%s", got, tc.shown, joined(p))
			}
			if heads.reads != 1 {
				t.Fatalf("read the conversation's first messages %d times, want 1", heads.reads)
			}
		})
	}
}
