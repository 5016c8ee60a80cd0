package enrich

import (
	"context"
	"encoding/json"
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

// beforePin is a store whose first UpsertFact runs first, once: what
// happens between the Compactor's reads and its pin's write.
type beforePin struct {
	*sqlite.Store
	first func()
}

func (s *beforePin) UpsertFact(ctx context.Context, f memory.Fact, maxPerUser int) (memory.Fact, error) {
	if first := s.first; first != nil {
		s.first = nil
		first()
	}
	return s.Store.UpsertFact(ctx, f, maxPerUser)
}

// A redelivered exchange (capture's queue gave it again after a crash
// between its save and its hooks) is saved as a duplicate, which stores
// nothing: the Compactor pins what its turn states as stated in the
// message the first save stored, in the conversation that holds it now
// (the one its chat's continuation adopted it into, too). When the
// conversation is deleted and started again under its name before the
// pins are written — before the round reads, or between its reads and
// its write — nothing is pinned into the new conversation.
func TestLateCompactionOfARedeliveredExchange(t *testing.T) {
	const goal = "I want to save R$ 5.000 by June."
	for _, tt := range []struct {
		name, conv, candidate string
		adopt                 bool
		restart               string // "", "before" the round, "at" its first pin
		wantConv              string // "": no pin
	}{
		{name: "stored", conv: "c", wantConv: "c"},
		{name: "moved", conv: memory.DefaultConversation, candidate: "chat", adopt: true, wantConv: "chat"},
		{name: "restarted before", conv: "c", restart: "before"},
		{name: "restarted at the pin", conv: "c", restart: "at"},
		{name: "default restarted before", conv: memory.DefaultConversation, restart: "before"},
		{name: "default restarted at the pin", conv: memory.DefaultConversation, restart: "at"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			sq, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "memgate.db"), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sq.Close() })
			st := &beforePin{Store: sq}
			id := memory.Identity{Tenant: "t", User: "u", Conversation: tt.conv}
			ex := memory.Exchange{ID: "first", Identity: id, At: time.Now().Add(-time.Hour), Candidate: tt.candidate,
				Turn:  []memory.Message{mustParse(t, "user", goal)},
				Reply: mustParse(t, "assistant", "A good plan.")}
			if _, err := st.SaveExchange(ctx, ex); err != nil {
				t.Fatal(err)
			}
			if tt.adopt { // the save recorded the candidate
				to := memory.Identity{Tenant: id.Tenant, User: id.User, Conversation: tt.candidate}
				if n, err := st.Adopt(ctx, to, "", append(slices.Clone(ex.Turn), ex.Reply), time.Time{}, 0); err != nil || n != 2 {
					t.Fatalf("Adopt = %d, %v; want 2 moved", n, err)
				}
			}
			// The hooks never ran; capture redelivers the exchange.
			res, err := st.SaveExchange(ctx, ex)
			if err != nil || !res.Duplicate {
				t.Fatalf("second save = %+v, %v; want a duplicate", res, err)
			}
			res.GuardSince = ex.At // as the write path hands it to the hooks
			restart := func() {
				if err := st.DeleteConversation(ctx, id); err != nil {
					t.Error(err)
				}
				again := memory.Exchange{ID: "again", Identity: id, At: ex.At.Add(time.Minute),
					Turn:  []memory.Message{{Role: "user", Content: "A new start."}},
					Reply: memory.Message{Role: "assistant", Content: "Fine."}}
				if _, err := st.SaveExchange(ctx, again); err != nil {
					t.Error(err)
				}
			}
			switch tt.restart {
			case "before":
				restart()
			case "at":
				st.first = restart
			}
			c := New(st, st, decidingSummarizer{}, nil, wordCounter{}, Options{
				RecentTokens: 1000, HighWatermark: 0.9, LowWatermark: 0.4,
				MaxMessages: 50, KeepMessages: 10, MaxSummaryTokens: 50, FallbackAfter: 3, MaxFacts: 10,
			}, nil)
			if err := c.AfterSave(ctx, ex, res); err != nil && !(tt.restart != "" && errors.Is(err, memory.ErrErased)) {
				t.Fatal(err)
			}
			facts, err := st.Facts(ctx, id.Tenant, id.User, time.Now(), true)
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantConv == "" {
				if len(facts) != 0 {
					t.Fatalf("pins after the conversation started again = %+v, want none", facts)
				}
				return
			}
			if len(facts) != 1 || facts[0].Conversation != tt.wantConv || facts[0].Source != memory.Key(ex.ID, 0) || !facts[0].Pinned {
				t.Fatalf("pins = %+v, want the goal pinned in %s, stated in %s", facts, tt.wantConv, memory.Key(ex.ID, 0))
			}
		})
	}
}

func mustParse(t *testing.T, role, content string) memory.Message {
	t.Helper()
	b, err := json.Marshal(map[string]string{"role": role, "content": content})
	if err != nil {
		t.Fatal(err)
	}
	m, err := memory.ParseMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
