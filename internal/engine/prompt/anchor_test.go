package prompt

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestWindowStartsAfterTheSummary: when the store gives as many turns as
// asked for, the recent turns start at the first of them if it follows
// the summary with no turn missing (every loaded turn is shown), and at a
// step boundary of RecentMessages/2 sequence numbers otherwise (older
// turns were not loaded, and the window must move in steps).
func TestWindowStartsAfterTheSummary(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	const recent = 10
	for _, tc := range []struct {
		name      string
		summaryTo int64 // the summary's last sequence number
		firstSeq  int64 // the first loaded turn's
		wantShown int
	}{
		{"loaded turns follow the summary", 12, 13, recent},
		{"the summary reaches into the loaded turns", 14, 13, recent - 2},
		{"turns missing between summary and load", 10, 13, 8}, // 13..22: the first step boundary is 15
		{"no summary, older turns not loaded", 0, 13, 8},
		{"no summary, the conversation's first turns", 0, 1, recent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := &fakeMemory{}
			for i := range recent {
				role := "user"
				if i%2 == 1 {
					role = "assistant"
				}
				raw, _ := json.Marshal(map[string]string{"role": role, "content": fmt.Sprintf("turn %d", tc.firstSeq+int64(i))})
				m := mustMsg(t, string(raw))
				m.Seq, m.Key = tc.firstSeq+int64(i), fmt.Sprint("m", tc.firstSeq+int64(i))
				mem.stored = append(mem.stored, m)
			}
			if tc.summaryTo > 0 {
				mem.summary = &memory.Summary{Version: 1, FromSeq: 1, ToSeq: tc.summaryTo, Text: "Earlier talk.", Summariser: memory.SummariserModel}
			}
			a, err := NewAssembler(Deps{History: mem, Summaries: mem, Counter: byteCounter{}},
				Options{RecentMessages: recent, MaxContextTokens: 100000, Shares: Shares{Summary: 0.2},
					Now: func() time.Time { return now }}, nil)
			if err != nil {
				t.Fatal(err)
			}
			p, err := a.Prepare(context.Background(), request(t, memory.ModeOn, uNew))
			if err != nil {
				t.Fatal(err)
			}
			shown := 0
			for _, raw := range p.Messages {
				var m struct{ Content string }
				if err := json.Unmarshal(raw, &m); err != nil {
					t.Fatal(err)
				}
				var n int
				if _, err := fmt.Sscanf(m.Content, "turn %d", &n); err == nil {
					shown++
				}
			}
			if shown != tc.wantShown {
				t.Errorf("%d stored turns shown, want %d:\n%s", shown, tc.wantShown, joined(p))
			}
		})
	}
}
