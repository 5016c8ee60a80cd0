package recall

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
)

// beforeWrite is a store whose first AddItems runs first, once: what
// happens between the Indexer's reads and its write.
type beforeWrite struct {
	*sqlite.Store
	first func()
}

func (s *beforeWrite) AddItems(ctx context.Context, items []memory.Item) error {
	if f := s.first; f != nil {
		s.first = nil
		f()
	}
	return s.Store.AddItems(ctx, items)
}

// The Indexer's guarded round writes an exchange's message items, its
// conversation's summary's and its user's new facts' (the stores check
// each against what it was read from); when the conversation is deleted
// and started again under its name between the round's reads and its
// write (a late round, a retried one), it writes none of them back.
func TestLateIndexDoesNotResurrectARecreatedConversation(t *testing.T) {
	for _, tt := range []struct {
		conv     string
		recreate bool
	}{{"c", false}, {"c", true}, {memory.DefaultConversation, true}} {
		t.Run(caseName(tt.conv, tt.recreate), func(t *testing.T) {
			ctx := context.Background()
			sq, ex, res := savedLate(t, tt.conv, "We planned the lantern garden party.", "A lantern for each table.")
			st, id := &beforeWrite{Store: sq}, ex.Identity
			if err := st.SaveSummary(ctx, memory.Summary{Tenant: id.Tenant, User: id.User, Conversation: id.Conversation,
				Version: 1, FromSeq: 1, ToSeq: 2, Text: "The lantern garden party was planned.",
				Summariser: memory.SummariserModel, GuardSince: ex.At, Through: memory.Key(ex.ID, 1)}); err != nil {
				t.Fatal(err)
			}
			if _, err := st.UpsertFact(ctx, memory.Fact{Tenant: id.Tenant, User: id.User, Conversation: id.Conversation,
				Type: memory.FactEvent, Key: "party", Value: "lantern garden party", Confidence: 0.9,
				CreatedAt: ex.At, UpdatedAt: ex.At, GuardSince: ex.At, Source: memory.Key(ex.ID, 0)}, 0); err != nil {
				t.Fatal(err)
			}
			if tt.recreate {
				st.first = func() { restartLate(t, sq, ex) }
			}
			if err := NewIndexer(st, NewLocal(16), nil).AfterSave(ctx, ex, res); err != nil {
				t.Fatal(err)
			}
			hits, err := st.SearchText(ctx, memory.ItemQuery{Tenant: id.Tenant, User: id.User, Text: "lantern", Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, h := range hits {
				kinds = append(kinds, h.Kind)
			}
			slices.Sort(kinds)
			want := []string{KindFact, KindMessage, KindMessage, KindSummary}
			if tt.recreate {
				want = nil
			}
			if !slices.Equal(kinds, want) {
				t.Fatalf("items found = %q, want %q", kinds, want)
			}
		})
	}
}

// savedLate opens a SQLite store with an exchange saved in conversation
// conv an hour ago, and its result as the write path hands it to the
// hooks (guarded since the exchange).
func savedLate(t *testing.T, conv, turn, reply string) (*sqlite.Store, memory.Exchange, memory.SaveResult) {
	t.Helper()
	sq, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "memgate.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sq.Close() })
	ex := memory.Exchange{ID: "before", Identity: memory.Identity{Tenant: "t", User: "u", Conversation: conv},
		At:    time.Now().Add(-time.Hour),
		Turn:  []memory.Message{{Role: "user", Content: turn}},
		Reply: memory.Message{Role: "assistant", Content: reply}}
	res, err := sq.SaveExchange(context.Background(), ex)
	if err != nil {
		t.Fatal(err)
	}
	res.GuardSince = ex.At
	return sq, ex, res
}

// restartLate deletes ex's conversation and starts one of its name again,
// with a turn dated a minute after ex (a replay).
func restartLate(t *testing.T, sq *sqlite.Store, ex memory.Exchange) {
	ctx := context.Background()
	if err := sq.DeleteConversation(ctx, ex.Identity); err != nil {
		t.Error(err)
	}
	again := memory.Exchange{ID: "after", Identity: ex.Identity, At: ex.At.Add(time.Minute),
		Turn:  []memory.Message{{Role: "user", Content: "A new start."}},
		Reply: memory.Message{Role: "assistant", Content: "Fine."}}
	if _, err := sq.SaveExchange(ctx, again); err != nil {
		t.Error(err)
	}
}

func caseName(conv string, recreate bool) string {
	if recreate {
		return conv + "/recreated"
	}
	return conv
}

// beforeFact is a store whose first UpsertFact runs first, once: what
// happens between the Extractor's model call and its write.
type beforeFact struct {
	*sqlite.Store
	first func()
}

func (s *beforeFact) UpsertFact(ctx context.Context, f memory.Fact, maxPerUser int) (memory.Fact, error) {
	if first := s.first; first != nil {
		s.first = nil
		first()
	}
	return s.Store.UpsertFact(ctx, f, maxPerUser)
}

// The Extractor's guarded round records a fact as stated in the user
// message its exchange stored; when the conversation is deleted and
// started again under its name between the model's answer and the write
// (a late round, a retried one), the fact is not written into the new
// conversation.
func TestLateExtractionDoesNotResurrectARecreatedConversation(t *testing.T) {
	for _, tt := range []struct {
		conv     string
		recreate bool
	}{{"c", false}, {"c", true}, {memory.DefaultConversation, true}} {
		t.Run(caseName(tt.conv, tt.recreate), func(t *testing.T) {
			ctx := context.Background()
			sq, ex, res := savedLate(t, tt.conv, "I live in Lisbon.", "Lovely city.")
			st, id := &beforeFact{Store: sq}, ex.Identity
			if tt.recreate {
				st.first = func() { restartLate(t, sq, ex) }
			}
			chat := &fakeChatter{reply: `{"facts":[{"type":"profile","key":"city","value":"Lisbon","confidence":0.9}]}`}
			if err := NewExtractor(chat, st, ExtractorOptions{Model: "m"}, nil).AfterSave(ctx, ex, res); err != nil {
				t.Fatal(err)
			}
			facts, err := st.Facts(ctx, id.Tenant, id.User, time.Now(), true)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.recreate && len(facts) != 0:
				t.Fatalf("facts after a late extraction of the deleted conversation = %+v, want none", facts)
			case !tt.recreate && (len(facts) != 1 || facts[0].Source != memory.Key(ex.ID, 0)):
				t.Fatalf("facts = %+v, want the city, stated in %s", facts, memory.Key(ex.ID, 0))
			}
		})
	}
}

// An enrichment entry whose result does not say what its save stored (no
// Stored: one queued before stores reported it) gives the Extractor no
// message to record its facts as stated in; when the conversation was
// deleted and started again under its name meanwhile, none of them is
// written into the new conversation.
func TestLateExtractionNamingNoMessage(t *testing.T) {
	for _, conv := range []string{"c", memory.DefaultConversation} {
		t.Run(conv, func(t *testing.T) {
			ctx := context.Background()
			st, ex, res := savedLate(t, conv, "I live in Lisbon.", "Lovely city.")
			res.Stored = nil
			restartLate(t, st, ex)
			chat := &fakeChatter{reply: `{"facts":[{"type":"profile","key":"city","value":"Lisbon","confidence":0.9}]}`}
			if err := NewExtractor(chat, st, ExtractorOptions{Model: "m"}, nil).AfterSave(ctx, ex, res); err != nil {
				t.Fatal(err)
			}
			facts, err := st.Facts(ctx, ex.Tenant, ex.User, time.Now(), true)
			if err != nil {
				t.Fatal(err)
			}
			if len(facts) != 0 {
				t.Fatalf("facts after a late extraction of the deleted conversation = %+v, want none", facts)
			}
		})
	}
}
