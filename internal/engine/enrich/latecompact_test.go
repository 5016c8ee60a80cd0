package enrich

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
)

// beforeSummary is a store whose first SaveSummary runs first, once: what
// happens between the Compactor's reads (and its summariser's call) and
// its write.
type beforeSummary struct {
	*sqlite.Store
	first func()
}

func (s *beforeSummary) SaveSummary(ctx context.Context, sum memory.Summary) error {
	if f := s.first; f != nil {
		s.first = nil
		f()
	}
	return s.Store.SaveSummary(ctx, sum)
}

// The Compactor's guarded round writes the conversation's summary, and
// pins the decision it preserved as stated in the user message that
// grounds it; when the conversation is deleted and started again under
// its name between the round's reads and its write (a late round, a
// retried one), neither is written into the new conversation.
func TestLateCompactionDoesNotResurrectARecreatedConversation(t *testing.T) {
	for _, tt := range []struct {
		conv     string
		recreate bool
	}{{"c", false}, {"c", true}, {memory.DefaultConversation, true}} {
		name := tt.conv
		if tt.recreate {
			name += "/recreated"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			sq, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "memgate.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sq.Close() })
			st := &beforeSummary{Store: sq}
			id := memory.Identity{Tenant: "t", User: "u", Conversation: tt.conv}
			at := time.Now().Add(-time.Hour)
			var ex memory.Exchange
			var res memory.SaveResult
			for i, say := range []string{"We plan the lantern garden party.", "We chose the lantern colours.",
				"We booked the garden for June.", "We invite forty lantern makers."} {
				ex = memory.Exchange{ID: fmt.Sprint("before-", i), Identity: id, At: at.Add(time.Duration(i) * time.Minute),
					Turn: []memory.Message{{Role: "user", Content: say}}, Reply: memory.Message{Role: "assistant", Content: "Noted."}}
				if res, err = st.SaveExchange(ctx, ex); err != nil {
					t.Fatal(err)
				}
			}
			res.GuardSince = at // as the write path hands it to the hooks
			if tt.recreate {
				st.first = func() {
					if err := st.DeleteConversation(ctx, id); err != nil {
						t.Error(err)
					}
					again := memory.Exchange{ID: "after", Identity: id, At: at.Add(time.Minute), // replayed, dated
						Turn: []memory.Message{{Role: "user", Content: "A new start."}}, Reply: memory.Message{Role: "assistant", Content: "Fine."}}
					if _, err := st.SaveExchange(ctx, again); err != nil {
						t.Error(err)
					}
				}
			}
			c := New(st, st, decidingSummarizer{"We booked the garden for June"}, nil, wordCounter{}, Options{
				RecentTokens: 100, HighWatermark: 0.9, LowWatermark: 0.4,
				MaxMessages: 6, KeepMessages: 3, MaxSummaryTokens: 50, FallbackAfter: 3, MaxFacts: 10,
			}, nil)
			if err := c.AfterSave(ctx, ex, res); err != nil && !(tt.recreate && errors.Is(err, memory.ErrErased)) {
				t.Fatal(err)
			}
			sum, err := st.LatestSummary(ctx, id)
			facts, ferr := st.Facts(ctx, id.Tenant, id.User, time.Now(), true)
			if ferr != nil {
				t.Fatal(ferr)
			}
			if tt.recreate {
				if !errors.Is(err, memory.ErrNotFound) || len(facts) != 0 {
					t.Fatalf("after a late compaction of the deleted conversation: summary %q (%v), facts %+v; want none", sum.Text, err, facts)
				}
				return
			}
			if err != nil || !strings.Contains(sum.Text, "lantern") {
				t.Fatalf("summary = %q (%v), want the lantern party's", sum.Text, err)
			}
			if len(facts) != 1 || facts[0].Source != "before-2:0" {
				t.Fatalf("facts = %+v, want the decision pinned, stated in before-2:0", facts)
			}
		})
	}
}

// TestCoalesceTurnsKeepsStored: the result of a merged exchange holds the
// messages every merged save stored, in order, so extraction records its
// facts as stated in the newest turn's.
func TestCoalesceTurnsKeepsStored(t *testing.T) {
	var got []string
	h := CoalesceTurns(record.EachExchange(func(_ context.Context, _ memory.Exchange, res memory.SaveResult) error {
		for _, m := range res.Stored {
			got = append(got, m.Key)
		}
		return nil
	}))
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "c"}
	exs := []memory.Exchange{{ID: "e1", Identity: id}, {ID: "e2", Identity: id}}
	results := []memory.SaveResult{
		{Inserted: 2, Stored: []memory.Message{{Key: "e1:0"}, {Key: "e1:1"}}},
		{Inserted: 2, Stored: []memory.Message{{Key: "e2:0"}, {Key: "e2:1"}}},
	}
	if err := h.AfterSaveBatch(context.Background(), exs, results); err != nil {
		t.Fatal(err)
	}
	if want := []string{"e1:0", "e1:1", "e2:0", "e2:1"}; !slices.Equal(got, want) {
		t.Fatalf("stored keys seen = %q, want %q", got, want)
	}
	if len(results[0].Stored) != 2 {
		t.Fatalf("the first save's result was changed: %+v", results[0].Stored)
	}
}
