package prompt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestHoldSummary: with HoldSummary, a new summary version does not
// replace the one the previous stored turn was shown while every turn
// after that one still fits the window: the previous prompt stays the
// next one's prefix. When the turns no longer fit, or without
// HoldSummary, the newest summary is shown. So is it after an update or
// delete of the user's messages (an erasure moves their Messages
// revision), and when the revisions cannot be read.
func TestHoldSummary(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	turn := func(seq int) memory.Message {
		role := "user"
		if seq%2 == 0 {
			role = "assistant"
		}
		raw, _ := json.Marshal(map[string]string{"role": role, "content": fmt.Sprintf("turn %d about the trip", seq)})
		m := mustMsg(t, string(raw))
		m.Seq, m.Key = int64(seq), fmt.Sprint("m", seq)
		return m
	}
	for _, tc := range []struct {
		name     string
		hold     bool
		budget   int
		next     string // the next turn
		wantHeld bool
		// moved: the user's messages were updated or deleted between the
		// two requests; noRev: no revisions to read.
		moved, noRev bool
	}{
		{"held while the turns fit", true, 100000, "", true, false, false},
		{"held on a turn recall does not fill", true, 100000, `{"role":"user","content":"Sounds good."}`, true, false, false},
		{"newest without HoldSummary", false, 100000, "", false, false, false},
		{"newest when the turns outgrow the window", true, 900, "", false, false, false},
		{"newest on a turn recall fills", true, 100000, `{"role":"user","content":"When is my trip?"}`, false, false, false},
		{"newest after the user's messages changed", true, 100000, "", false, true, false},
		{"newest without revisions", true, 100000, "", false, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := &fakeMemory{summary: &memory.Summary{Version: 1, FromSeq: 1, ToSeq: 4, Text: "First summary.", Summariser: memory.SummariserModel}}
			for seq := 5; seq <= 14; seq++ {
				mem.stored = append(mem.stored, turn(seq))
			}
			rev := &messageRevisions{}
			deps := Deps{History: mem, Summaries: mem, Counter: byteCounter{}, Revisions: rev}
			if tc.noRev {
				deps.Revisions = nil
			}
			a, err := NewAssembler(deps,
				Options{RecentMessages: 40, MaxContextTokens: tc.budget, Shares: Shares{Summary: 0.1}, HoldSummary: tc.hold,
					FillRecall: true, FillWhen: FillAsked,
					Now: func() time.Time { return now }}, nil)
			if err != nil {
				t.Fatal(err)
			}
			cur := turn(15)
			p1, err := a.Prepare(context.Background(), request(t, memory.ModeOn, string(cur.Raw)))
			if err != nil {
				t.Fatal(err)
			}
			for seq := 5; seq <= 14; seq++ {
				if !strings.Contains(joined(p1), fmt.Sprintf(`"turn %d about`, seq)) {
					t.Fatalf("turn %d is not in the first prompt:\n%s", seq, joined(p1))
				}
			}
			// The turn is stored with its reply, and compaction writes a
			// second summary.
			mem.stored = append(mem.stored, cur, turn(16))
			mem.summary = &memory.Summary{Version: 2, FromSeq: 1, ToSeq: 10, Text: "Second summary.", Summariser: memory.SummariserModel}
			if tc.moved {
				rev.messages++
			}
			next := tc.next
			if next == "" {
				next = string(turn(17).Raw)
			}
			p2, err := a.Prepare(context.Background(), request(t, memory.ModeOn, next))
			if err != nil {
				t.Fatal(err)
			}
			got := joined(p2)
			if held := strings.Contains(got, "First summary."); held != tc.wantHeld {
				t.Fatalf("first summary shown = %v, want %v:\n%s", held, tc.wantHeld, got)
			}
			if !tc.wantHeld {
				if !strings.Contains(got, "Second summary.") {
					t.Errorf("the newest summary is not shown:\n%s", got)
				}
				return
			}
			for seq := 5; seq <= 16; seq++ {
				if !strings.Contains(got, fmt.Sprintf(`"turn %d about`, seq)) {
					t.Errorf("turn %d, after the held summary, is not shown:\n%s", seq, got)
				}
			}
			for i, raw := range p1.Messages {
				if i >= len(p2.Messages) || !bytes.Equal(raw, p2.Messages[i]) {
					t.Fatalf("the previous prompt is not the next one's prefix (message %d):\n%s\n---\n%s", i, joined(p1), got)
				}
			}
		})
	}
}

// messageRevisions answers a user's revisions with Messages = messages.
type messageRevisions struct{ messages int64 }

func (r *messageRevisions) ItemRevisions(context.Context, string, string) (memory.Revisions, error) {
	return memory.Revisions{Messages: r.messages}, nil
}
