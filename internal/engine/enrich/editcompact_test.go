package enrich

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// A compaction that read a message the user then edited (the edit saved
// between the Compactor's reads and its write) stores nothing: the store
// refuses a version covering a message no longer live (Summary.Covers),
// so the old text never reaches the summary. The next compaction writes
// the summary from the live branch.
func TestCompactionRacingAnEditDoesNotKeepTheOldText(t *testing.T) {
	ctx := context.Background()
	st := &beforeSummary{Store: mustSQLiteAt(t, filepath.Join(t.TempDir(), "memgate.db"))}
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "c"}
	at := time.Now().Add(-time.Hour)
	const phone = "My phone is 555-0100, call me."
	history := []memory.Message{mustParse(t, "user", phone), mustParse(t, "assistant", "Noted.")}
	for _, say := range []string{"We plan the lantern party.", "We chose the colours.", "We booked the garden."} {
		history = append(history, mustParse(t, "user", say), mustParse(t, "assistant", "Fine."))
	}
	ex1 := memory.Exchange{ID: "e1", Identity: id, At: at, Prior: history[:len(history)-2],
		Turn: history[len(history)-2 : len(history)-1], Reply: history[len(history)-1]}
	res, err := st.SaveExchange(ctx, ex1)
	if err != nil {
		t.Fatal(err)
	}
	stored := res.Stored
	stamps := memory.Stamps(ex1, len(stored))
	st.first = func() {
		// The user removes the phone number from the first message.
		edited := mustParse(t, "user", "Call me by email.")
		prior := append([]memory.Message{edited}, history[1:]...)
		ex2 := memory.Exchange{ID: "e2", Identity: id, At: at.Add(time.Minute), Prior: prior,
			Turn: []memory.Message{mustParse(t, "user", "And the music?")}, Reply: mustParse(t, "assistant", "A band.")}
		ex2.Edits = []memory.Edit{{Seq: stored[0].Seq, Pos: stamps[0].Pos, Digest: stamps[0].Digest, Amend: memory.Digest{1},
			Supersede: true, Text: &edited}}
		r, err := st.SaveExchange(ctx, ex2)
		if err != nil || len(r.Revised) != 1 {
			t.Errorf("the edit's save = %+v, %v; want the first message revised", r, err)
		}
	}
	c := New(st, st, decidingSummarizer{}, nil, wordCounter{}, Options{
		RecentTokens: 100, HighWatermark: 0.9, LowWatermark: 0.4,
		MaxMessages: 6, KeepMessages: 3, MaxSummaryTokens: 50, FallbackAfter: 3, MaxFacts: 10,
	}, nil)
	if err := c.Compact(ctx, id, "m"); err != nil {
		t.Fatal(err)
	}
	if st.first != nil {
		t.Fatal("the compaction wrote no summary: the race was not run")
	}
	if sum, err := st.LatestSummary(ctx, id); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("after a compaction racing the edit: summary %q (%v), want none", sum.Text, err)
	}
	if err := c.Compact(ctx, id, "m"); err != nil {
		t.Fatal(err)
	}
	sum, err := st.LatestSummary(ctx, id)
	if err != nil {
		t.Fatalf("the next compaction wrote no summary: %v", err)
	}
	if strings.Contains(sum.Text, "555-0100") || !strings.Contains(sum.Text, "email") {
		t.Fatalf("the next summary is %q, want the edited text's, without the phone number", sum.Text)
	}
}
