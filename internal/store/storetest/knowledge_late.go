package storetest

import (
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// testLateIndexOfRecreatedConversation covers a late index (the hooks'
// guarded AddItems, a retried round) of what a deleted conversation held,
// once a conversation of the same name — the default one too — was started
// again: the deleted exchange's message items, its summary's and its
// facts' are left out, while the new exchange's, indexed under the same
// guard (a replayed, dated history is guarded from before the deletion),
// are stored. So is left out a message item whose message its
// conversation does not hold.
func testLateIndexOfRecreatedConversation(t *testing.T, s KnowledgeStore) {
	ctx := testCtx(t)
	c1 := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	def := memory.Identity{Tenant: "acme", User: "alice", Conversation: memory.DefaultConversation}
	kept := memory.Identity{Tenant: "acme", User: "alice", Conversation: "kept"}
	guard := baseTime // before every exchange below
	n := 0
	// indexed saves an exchange of id and returns its items as the indexer
	// makes them (message, summary and fact items), each saying word.
	indexed := func(id memory.Identity, word string) []memory.Item {
		t.Helper()
		n++
		ex := simple(t, id, n)
		ex.ID += "-" + word
		res := mustSave(t, s, ex)
		var its []memory.Item
		for _, m := range res.Stored {
			its = append(its, guardedItem(id, "message", m.Key, word+" said "+m.Content, nil, guard))
		}
		if err := s.SaveSummary(ctx, memory.Summary{Tenant: id.Tenant, User: id.User, Conversation: id.Conversation,
			Version: 1, FromSeq: 1, ToSeq: 2, Text: word + " summary"}); err != nil {
			t.Fatalf("SaveSummary(%s): %v", id.Conversation, err)
		}
		sum, err := s.LatestSummary(ctx, id)
		if err != nil {
			t.Fatalf("LatestSummary(%s): %v", id.Conversation, err)
		}
		it := guardedItem(id, "summary", id.Conversation+":v1", word+" summary", nil, guard)
		it.CreatedAt = sum.CreatedAt
		its = append(its, it)
		f := fact(id.Tenant, id.User, memory.FactProfile, "city in "+id.Conversation, word, n)
		f.Conversation = id.Conversation
		f = mustUpsertFact(t, s, f, 0)
		it = guardedItem(id, "fact", strconv.FormatInt(f.ID, 10), "profile city: "+word, nil, guard)
		it.CreatedAt = f.UpdatedAt
		return append(its, it)
	}
	mustSave(t, s, simple(t, kept, 1))
	var old, fresh []memory.Item
	for _, id := range []memory.Identity{c1, def} {
		old = append(old, indexed(id, "Lisbon")...)
		if err := s.DeleteConversation(ctx, id); err != nil {
			t.Fatalf("DeleteConversation(%s): %v", id.Conversation, err)
		}
		fresh = append(fresh, indexed(id, "Porto")...) // the same name, started again
	}
	// The new exchanges' round, then the deleted ones' late round.
	mustAddItems(t, s, fresh...)
	mustAddItems(t, s, append(old,
		guardedItem(kept, "message", memory.Key("ex-alice-kept-1", 0), "Braga said question 1", nil, guard),
		guardedItem(kept, "message", memory.Key("never-saved", 0), "Lisbon said nothing", nil, guard))...)

	search := func(word string) []string {
		got := refs(mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "alice", Text: word, Limit: 50}))
		slices.Sort(got)
		return got
	}
	if got := search("Lisbon"); len(got) != 0 {
		t.Errorf("items of the deleted conversations found after their late index: %q", got)
	}
	want := refs(fresh)
	slices.Sort(want)
	want = slices.Compact(want)
	if got := search("Porto"); !slices.Equal(got, want) {
		t.Errorf("items of the conversations started again = %q, want %q", got, want)
	}
	if got := search("Braga"); !slices.Equal(got, []string{memory.Key("ex-alice-kept-1", 0)}) {
		t.Errorf("items of the kept conversation = %q, want its message's", got)
	}
}

// testLateKnowledgeOfRecreatedConversation covers a late guarded fact and
// summary (an extraction or a compaction of a deleted conversation's
// exchange) written once a conversation of the same name — the default one
// too — started again: each names the message it was made from
// (memory.Fact.Source, memory.Summary.Through), which the new conversation
// does not hold, and is refused with memory.ErrErased, however early its
// guard; the same writes made from the new conversation's messages are
// stored.
func testLateKnowledgeOfRecreatedConversation(t *testing.T, s KnowledgeStore) {
	ctx := testCtx(t)
	guard := baseTime // before every exchange below, as a dated replay's
	for i, id := range []memory.Identity{
		{Tenant: "acme", User: "alice", Conversation: "c1"},
		{Tenant: "acme", User: "alice", Conversation: memory.DefaultConversation},
	} {
		old := mustSave(t, s, simple(t, id, 2*i+1)).Stored
		if err := s.DeleteConversation(ctx, id); err != nil {
			t.Fatalf("DeleteConversation(%s): %v", id.Conversation, err)
		}
		fresh := mustSave(t, s, simple(t, id, 2*i+2)).Stored // the same name, started again
		// write writes the guarded fact and summary made from msgs.
		write := func(msgs []memory.Message, city string) (factErr, summaryErr error) {
			f := guardedFact(id, city, guard)
			f.Key, f.Source = "city in "+id.Conversation, msgs[0].Key
			_, factErr = s.UpsertFact(ctx, f, 0)
			summaryErr = s.SaveSummary(ctx, memory.Summary{Tenant: id.Tenant, User: id.User, Conversation: id.Conversation,
				Version: 1, FromSeq: 1, ToSeq: 2, Text: city + " summary", Through: msgs[len(msgs)-1].Key, GuardSince: guard})
			return factErr, summaryErr
		}
		factErr, summaryErr := write(old, "Lisbon")
		if !errors.Is(factErr, memory.ErrErased) {
			t.Errorf("late guarded UpsertFact of the deleted %s = %v, want memory.ErrErased", id.Conversation, factErr)
		}
		if !errors.Is(summaryErr, memory.ErrErased) {
			t.Errorf("late guarded SaveSummary of the deleted %s = %v, want memory.ErrErased", id.Conversation, summaryErr)
		}
		if factErr, summaryErr := write(fresh, "Porto"); factErr != nil || summaryErr != nil {
			t.Fatalf("guarded writes of the %s started again: UpsertFact %v, SaveSummary %v", id.Conversation, factErr, summaryErr)
		}
		if got := mustLatestSummary(t, s, id); got.Text != "Porto summary" || got.Through != "" {
			t.Errorf("summary of the %s started again = %q (through %q), want the new one's, through \"\"", id.Conversation, got.Text, got.Through)
		}
	}
	got := values(mustFacts(t, s, "acme", "alice", baseTime.Add(time.Hour), true))
	if !slices.Equal(got, []string{"Porto", "Porto"}) {
		t.Errorf("facts = %q, want the new conversations' alone", got)
	}
}

// testLateKnowledgeNamingNoMessage covers a guarded fact or summary that
// names no message it was made from (memory.Fact.Source,
// memory.Summary.Through ""): nothing tells which conversation of the
// name it was made from, so it is refused with memory.ErrErased — in a
// conversation started again after a deletion, which the deleted one's
// late write must not reach, and so in any conversation, the default one
// too. The same writes unguarded (the management API's, made now) are
// stored.
func testLateKnowledgeNamingNoMessage(t *testing.T, s KnowledgeStore) {
	ctx := testCtx(t)
	guard := baseTime // before every exchange below, as a dated replay's
	for i, id := range []memory.Identity{
		{Tenant: "acme", User: "alice", Conversation: "c1"},
		{Tenant: "acme", User: "alice", Conversation: memory.DefaultConversation},
	} {
		mustSave(t, s, simple(t, id, 2*i+1))
		if err := s.DeleteConversation(ctx, id); err != nil {
			t.Fatalf("DeleteConversation(%s): %v", id.Conversation, err)
		}
		mustSave(t, s, simple(t, id, 2*i+2)) // the same name, started again
		f := guardedFact(id, "Lisbon", guard)
		f.Key, f.Source = "city in "+id.Conversation, ""
		if _, err := s.UpsertFact(ctx, f, 0); !errors.Is(err, memory.ErrErased) {
			t.Errorf("guarded UpsertFact in %s naming no message = %v, want memory.ErrErased", id.Conversation, err)
		}
		sum := memory.Summary{Tenant: id.Tenant, User: id.User, Conversation: id.Conversation,
			Version: 1, FromSeq: 1, ToSeq: 2, Text: "Lisbon summary", GuardSince: guard}
		if err := s.SaveSummary(ctx, sum); !errors.Is(err, memory.ErrErased) {
			t.Errorf("guarded SaveSummary of %s naming no message = %v, want memory.ErrErased", id.Conversation, err)
		}
		f.Value, f.GuardSince, sum.Text, sum.GuardSince = "Porto", time.Time{}, "Porto summary", time.Time{}
		mustUpsertFact(t, s, f, 0)
		if err := s.SaveSummary(ctx, sum); err != nil {
			t.Fatalf("unguarded SaveSummary of %s: %v", id.Conversation, err)
		}
		if got := mustLatestSummary(t, s, id); got.Text != "Porto summary" {
			t.Errorf("summary of %s = %q, want the unguarded one", id.Conversation, got.Text)
		}
	}
	assertValues(t, "facts", mustFacts(t, s, "acme", "alice", baseTime.Add(time.Hour), true), "Porto", "Porto")
}
