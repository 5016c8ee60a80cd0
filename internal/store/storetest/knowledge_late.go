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
// guard. So is one naming no message: nothing tells which conversation of
// the name it was made from. The same writes made from the new
// conversation's messages are stored, and so are unguarded ones (the
// management API's, made now) naming none.
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
		// write writes the fact and summary version made from the
		// messages source and through name ("": none), guarded from since.
		write := func(source, through, city string, since time.Time, version int) (factErr, summaryErr error) {
			f := guardedFact(id, city, guard)
			f.Key, f.Source, f.GuardSince = "city in "+id.Conversation, source, since
			_, factErr = s.UpsertFact(ctx, f, 0)
			summaryErr = s.SaveSummary(ctx, memory.Summary{Tenant: id.Tenant, User: id.User, Conversation: id.Conversation,
				Version: version, FromSeq: 1, ToSeq: 2, Text: city + " summary", Through: through, GuardSince: since})
			return factErr, summaryErr
		}
		for _, late := range []struct{ what, source, through string }{
			{"of the deleted " + id.Conversation, old[0].Key, old[len(old)-1].Key},
			{"in " + id.Conversation + " naming no message", "", ""},
		} {
			factErr, summaryErr := write(late.source, late.through, "Lisbon", guard, 1)
			if !errors.Is(factErr, memory.ErrErased) {
				t.Errorf("late guarded UpsertFact %s = %v, want memory.ErrErased", late.what, factErr)
			}
			if !errors.Is(summaryErr, memory.ErrErased) {
				t.Errorf("late guarded SaveSummary %s = %v, want memory.ErrErased", late.what, summaryErr)
			}
		}
		if factErr, summaryErr := write(fresh[0].Key, fresh[len(fresh)-1].Key, "Porto", guard, 1); factErr != nil || summaryErr != nil {
			t.Fatalf("guarded writes of the %s started again: UpsertFact %v, SaveSummary %v", id.Conversation, factErr, summaryErr)
		}
		if got := mustLatestSummary(t, s, id); got.Text != "Porto summary" || got.Through != "" {
			t.Errorf("summary of the %s started again = %q (through %q), want the new one's, through \"\"", id.Conversation, got.Text, got.Through)
		}
		if factErr, summaryErr := write("", "", "Porto", time.Time{}, 2); factErr != nil || summaryErr != nil {
			t.Fatalf("unguarded writes of %s naming no message: UpsertFact %v, SaveSummary %v", id.Conversation, factErr, summaryErr)
		}
		if got := mustLatestSummary(t, s, id); got.Version != 2 {
			t.Errorf("summary of %s = version %d, want the unguarded one (2)", id.Conversation, got.Version)
		}
	}
	assertValues(t, "facts", mustFacts(t, s, "acme", "alice", baseTime.Add(time.Hour), true), "Porto", "Porto")
}
