package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// testDeleteConversationDeletesItsFacts covers DeleteConversation's facts:
// the facts only the deleted conversation stated go — pinned or not,
// current or superseded — with their recall items; a fact another
// conversation or the API also stated stays (naming a surviving source),
// and a value the conversation superseded is current again. Other users'
// facts under the same conversation id are never touched.
func testDeleteConversationDeletesItsFacts(t *testing.T, s KnowledgeStore) {
	cx := memory.Identity{Tenant: "acme", User: "alice", Conversation: "cx"}
	cy := memory.Identity{Tenant: "acme", User: "alice", Conversation: "cy"}
	bobCx := memory.Identity{Tenant: "acme", User: "bob", Conversation: "cx"}
	otherCx := memory.Identity{Tenant: "other", User: "alice", Conversation: "cx"}
	for _, id := range []memory.Identity{cx, cy, bobCx, otherCx} {
		mustSave(t, s, simple(t, id, 1))
	}
	n := 0
	state := func(id memory.Identity, typ memory.FactType, key, value string, pinned bool) memory.Fact {
		t.Helper()
		n++
		f := fact(id.Tenant, id.User, typ, key, value, n)
		f.Conversation, f.Pinned = id.Conversation, pinned
		got := mustUpsertFact(t, s, f, 0)
		// The fact's recall item, as the indexer makes it: in the
		// conversation that stated the fact last.
		owner := id
		owner.Conversation = got.Conversation
		mustAddItems(t, s, item(owner, "fact", strconv.FormatInt(got.ID, 10), key+": "+value, vec4(1, float32(n), 0, 0)))
		return got
	}
	api := memory.Identity{Tenant: "acme", User: "alice"}

	// The finding: a decision pinned from cx alone.
	lisbon := state(cx, memory.FactDecision, "move", "I decided to move to Lisbon with my partner Mariabelle", true)
	// Stated in cy, then restated in cx (cx is where it was last stated).
	state(cy, memory.FactPreference, "drink", "tea", false)
	tea := state(cx, memory.FactPreference, "drink", "tea", false)
	// Added through the API, then restated in cx.
	state(api, memory.FactProfile, "city", "Porto", false)
	state(cx, memory.FactProfile, "city", "Porto", false)
	// cy said cat, cx superseded it with dog (pinned).
	state(cy, memory.FactProfile, "pet", "cat", false)
	state(cx, memory.FactProfile, "pet", "dog", true)
	// cx said teacher, cy superseded it with nurse: teacher is history of cx alone.
	state(cx, memory.FactProfile, "job", "teacher", false)
	state(cy, memory.FactProfile, "job", "nurse", false)
	// Stated in cx (its item indexed there), then in cy, not indexed again.
	state(cx, memory.FactProfile, "language", "Portuguese", false)
	n++
	restated := fact("acme", "alice", memory.FactProfile, "language", "Portuguese", n)
	restated.Conversation = cy.Conversation
	mustUpsertFact(t, s, restated, 0)
	// The same conversation id under another user and another tenant.
	bobs := state(bobCx, memory.FactDecision, "move", "I decided to move to Lisbon with my partner Mariabelle", true)
	others := state(otherCx, memory.FactDecision, "move", "I decided to move to Lisbon with my partner Mariabelle", true)

	if tea.Conversation != "cx" {
		t.Fatalf("restated fact names %q, want cx (where it was last stated)", tea.Conversation)
	}
	if err := s.DeleteConversation(testCtx(t), cx); err != nil {
		t.Fatalf("DeleteConversation: %v", err)
	}

	now := baseTime.Add(time.Hour)
	current := mustFacts(t, s, "acme", "alice", now, false)
	got := values(current)
	slices.Sort(got)
	if want := []string{"Porto", "Portuguese", "cat", "nurse", "tea"}; !slices.Equal(got, want) {
		t.Fatalf("current facts after deleting cx = %q, want %q", got, want)
	}
	for _, f := range current {
		want := map[string]string{"tea": "cy", "Porto": "", "Portuguese": "cy", "cat": "cy", "nurse": "cy"}[f.Value]
		if f.Conversation != want {
			t.Errorf("fact %q names conversation %q after deleting cx, want %q", f.Value, f.Conversation, want)
		}
		if f.Value == "cat" && f.Pinned {
			t.Errorf("restored fact %q is pinned: the pin came from the deleted conversation", f.Value)
		}
	}
	history := values(mustFacts(t, s, "acme", "alice", now, true))
	for _, gone := range []string{lisbon.Value, "dog", "teacher"} {
		if slices.Contains(history, gone) {
			t.Fatalf("history after deleting cx = %q, still holds %q", history, gone)
		}
	}
	if err := s.DeleteFact(testCtx(t), "acme", "alice", lisbon.ID); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("DeleteFact of the pinned decision after deleting cx = %v, want memory.ErrNotFound", err)
	}

	// Recall items: the deleted facts' are gone, the surviving ones' stay
	// (moved to the conversation that still states them).
	q := memory.ItemQuery{Tenant: "acme", User: "alice", Text: "Lisbon Mariabelle partner", Limit: 10}
	if got := mustSearchText(t, s, q); len(got) != 0 {
		t.Fatalf("SearchText for the deleted decision = %+v, want nothing", got)
	}
	q.Text = "drink tea city Porto pet dog job teacher nurse language Portuguese"
	texts := []string{}
	for _, it := range mustSearchText(t, s, q) {
		texts = append(texts, it.Text)
		if (it.Text == "drink: tea" || it.Text == "language: Portuguese") && it.Conversation != "cy" {
			t.Errorf("item %q of a kept fact is in conversation %q, want cy", it.Text, it.Conversation)
		}
	}
	slices.Sort(texts)
	if want := []string{"city: Porto", "drink: tea", "job: nurse", "language: Portuguese"}; !slices.Equal(texts, want) {
		t.Fatalf("SearchText of fact items after deleting cx = %q, want %q", texts, want)
	}
	vq := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: vec4(1, 1, 0, 0), Model: testModel, Dims: 4, Limit: 20}
	for _, it := range mustSearchVector(t, s, vq) {
		if it.Ref == strconv.FormatInt(lisbon.ID, 10) {
			t.Fatalf("SearchVector still finds the deleted decision's item %+v", it)
		}
	}

	// Bob's and the other tenant's facts under conversation id cx stay.
	assertValues(t, "bob's facts", mustFacts(t, s, "acme", "bob", now, false), bobs.Value)
	assertValues(t, "the other tenant's facts", mustFacts(t, s, "other", "alice", now, false), others.Value)

	// Deleting cy too leaves only what the API stated.
	if err := s.DeleteConversation(testCtx(t), cy); err != nil {
		t.Fatalf("DeleteConversation(cy): %v", err)
	}
	assertValues(t, "facts after deleting cx and cy", mustFacts(t, s, "acme", "alice", now, true), "Porto")
	if got := mustSearchVector(t, s, vq); len(got) != 1 || got[0].Text != "city: Porto" {
		t.Fatalf("SearchVector after deleting cx and cy = %+v, want the API's fact alone", got)
	}
}

// testLateWritesOfDeletedConversation covers what the after-save hooks of a
// conversation's exchanges write once it is deleted: a guarded
// (memory.Fact.GuardSince) UpsertFact naming it returns memory.ErrErased
// and AddItems skips its items, so a fact extracted or a turn indexed late
// cannot bring it back; the same writes for a conversation that exists, and
// for the default conversation (which Adopt removes when it moves its
// turns), go through.
func testLateWritesOfDeletedConversation(t *testing.T, s KnowledgeStore) {
	ctx := testCtx(t)
	cx := memory.Identity{Tenant: "acme", User: "alice", Conversation: "cx"}
	cy := memory.Identity{Tenant: "acme", User: "alice", Conversation: "cy"}
	def := memory.Identity{Tenant: "acme", User: "alice", Conversation: memory.DefaultConversation}
	for _, id := range []memory.Identity{cx, cy, def} {
		mustSave(t, s, simple(t, id, 1))
	}
	captured := baseTime.Add(time.Second)
	if err := s.DeleteConversation(ctx, cx); err != nil {
		t.Fatalf("DeleteConversation: %v", err)
	}
	late := fact("acme", "alice", memory.FactDecision, "move", "I decided to move to Lisbon with my partner Mariabelle", 1)
	late.Conversation, late.Pinned, late.GuardSince = cx.Conversation, true, captured
	late.Source = memory.Key("ex-alice-cx-1", 0) // its user message, deleted with it
	if _, err := s.UpsertFact(ctx, late, 0); !errors.Is(err, memory.ErrErased) {
		t.Fatalf("late guarded UpsertFact for the deleted conversation = %v, want memory.ErrErased", err)
	}
	if err := s.AddItems(ctx, []memory.Item{
		guardedItem(cx, "message", memory.Key("ex-alice-cx-1", 0), "we move to Lisbon with Mariabelle", vec4(1, 0, 0, 0), captured),
		guardedItem(cy, "message", memory.Key("ex-alice-cy-1", 0), "we move to Porto with Mariabelle", vec4(1, 0, 0, 0), captured),
		guardedItem(def, "message", memory.Key("ex-alice-default-1", 0), "we move to Braga with Mariabelle", vec4(1, 0, 0, 0), captured),
	}); err != nil {
		t.Fatalf("AddItems: %v", err)
	}
	q := memory.ItemQuery{Tenant: "acme", User: "alice", Text: "Mariabelle", Limit: 10}
	got := refs(mustSearchText(t, s, q))
	slices.Sort(got)
	if want := []string{memory.Key("ex-alice-cy-1", 0), memory.Key("ex-alice-default-1", 0)}; !slices.Equal(got, want) {
		t.Fatalf("items after late indexing = %q, want %q (none of the deleted conversation)", got, want)
	}
	for _, id := range []memory.Identity{cy, def} {
		f := late
		f.Conversation, f.Key, f.Source = id.Conversation, "move "+id.Conversation, memory.Key("ex-alice-"+id.Conversation+"-1", 0)
		if _, err := s.UpsertFact(ctx, f, 0); err != nil {
			t.Fatalf("guarded UpsertFact for conversation %q: %v", id.Conversation, err)
		}
	}
	assertValues(t, "facts", mustFacts(t, s, "acme", "alice", baseTime.Add(time.Hour), true), late.Value, late.Value)
}

// testGuardedWritesRaceConversationDelete runs writers that keep writing
// guarded facts and items for a conversation while it is deleted: whatever
// the interleaving, nothing of it is left once both are done, and the
// user's other conversation keeps what was written for it.
func testGuardedWritesRaceConversationDelete(t *testing.T, s KnowledgeStore) {
	const maxRaceWrites = 2000
	ctx := testCtx(t)
	const convs = 3
	kept := memory.Identity{Tenant: "acme", User: "alice", Conversation: "kept"}
	mustSave(t, s, simple(t, kept, 1))
	captured := baseTime.Add(time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, convs*2)
	for c := range convs {
		id := memory.Identity{Tenant: "acme", User: "alice", Conversation: fmt.Sprintf("gone%d", c)}
		mustSave(t, s, simple(t, id, 1))
		wrote := make(chan struct{})
		wg.Add(2)
		go func() { // the hooks
			defer wg.Done()
			for i := 0; ; i++ {
				if i == maxRaceWrites {
					errs <- fmt.Errorf("%s: guarded writes still accepted after %d rounds", id.Conversation, i)
					return
				}
				f := fact("acme", "alice", memory.FactDecision, fmt.Sprintf("plan %s %d", id.Conversation, i), "move to Lisbon with Mariabelle", i)
				f.Conversation, f.Pinned, f.GuardSince = id.Conversation, true, captured
				f.Source = memory.Key("ex-alice-"+id.Conversation+"-1", 0)
				_, ferr := s.UpsertFact(ctx, f, 0)
				ierr := s.AddItems(ctx, []memory.Item{
					guardedItem(id, "message", memory.Key("ex-alice-"+id.Conversation+"-1", i%2), "Lisbon with Mariabelle", vec4(1, 0, 0, 0), captured),
					guardedItem(kept, "message", memory.Key("ex-alice-kept-1", c%2), "Porto with Mariabelle", vec4(0, 1, 0, 0), captured),
				})
				if i == 0 {
					close(wrote)
				}
				if ierr != nil {
					errs <- fmt.Errorf("%s AddItems: %w", id.Conversation, ierr)
					return
				}
				if errors.Is(ferr, memory.ErrErased) {
					return // the delete is seen; the hooks stop
				}
				if ferr != nil {
					errs <- fmt.Errorf("%s UpsertFact: %w", id.Conversation, ferr)
					return
				}
			}
		}()
		go func() { // the user
			defer wg.Done()
			select {
			case <-wrote:
			case <-ctx.Done():
				return
			}
			if err := s.DeleteConversation(context.WithoutCancel(ctx), id); err != nil {
				errs <- fmt.Errorf("%s DeleteConversation: %w", id.Conversation, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if fs := mustFacts(t, s, "acme", "alice", baseTime.Add(time.Hour), true); len(fs) != 0 {
		t.Errorf("facts of the deleted conversations left: %d (%+v)", len(fs), fs[0])
	}
	q := memory.ItemQuery{Tenant: "acme", User: "alice", Text: "Lisbon Mariabelle", Limit: 50}
	for _, it := range mustSearchText(t, s, q) {
		if it.Conversation != kept.Conversation {
			t.Fatalf("item %s of deleted conversation %q left", it.Ref, it.Conversation)
		}
	}
	if got := mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "alice", Text: "Porto", Limit: 5}); len(got) == 0 {
		t.Fatal("the kept conversation's items are gone too")
	}
}

// testDeleteConversationRacesIndexing deletes conversations while unguarded
// writers (the management API, a reindex) keep indexing items of them:
// neither side fails (no deadlock between their locks). Each call has its
// own suiteTimeout, so a deadlocked call fails it however long the whole
// race takes on a loaded machine.
func testDeleteConversationRacesIndexing(t *testing.T, s KnowledgeStore) {
	const rounds = 30
	var wg sync.WaitGroup
	errs := make(chan error, 4*rounds)
	for c := range 3 {
		id := memory.Identity{Tenant: "acme", User: "alice", Conversation: fmt.Sprintf("busy%d", c)}
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range rounds {
				if err := s.AddItems(testCtx(t), []memory.Item{
					item(id, "message", fmt.Sprintf("%s-%d:0", id.Conversation, i), "the lighthouse keeper", vec4(1, 0, 0, 0)),
					item(id, "fact", strconv.Itoa(1000*c+i), "profile city: Lisbon", vec4(0, 1, 0, 0)),
				}); err != nil {
					errs <- fmt.Errorf("%s AddItems: %w", id.Conversation, err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := range rounds {
				mustSave(t, s, simple(t, id, i+1))
				if err := s.DeleteConversation(testCtx(t), id); err != nil {
					errs <- fmt.Errorf("%s DeleteConversation: %w", id.Conversation, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// testEmbedItemsNeverWritesAgain covers EmbedItems, the indexer's late
// vectors (recall.Indexer.Backfill): the rows still stored get the
// vectors, while an item whose conversation was deleted (even when a
// conversation of that name, the default one included, was started
// since), whose user was erased, or whose row holds another text, is not
// written again.
func testEmbedItemsNeverWritesAgain(t *testing.T, s KnowledgeStore) {
	ctx := testCtx(t)
	cx := memory.Identity{Tenant: "acme", User: "alice", Conversation: "cx"}
	def := memory.Identity{Tenant: "acme", User: "alice", Conversation: memory.DefaultConversation}
	kept := memory.Identity{Tenant: "acme", User: "alice", Conversation: "kept"}
	bob := memory.Identity{Tenant: "acme", User: "bob", Conversation: "cx"}
	for _, id := range []memory.Identity{cx, def, kept, bob} {
		mustSave(t, s, simple(t, id, 1))
	}
	textOnly := []memory.Item{
		item(cx, "message", "old-cx:0", "the Lisbon flat with Mariabelle", nil),
		item(def, "message", "old-def:0", "the Porto flat with Mariabelle", nil),
		item(kept, "message", "kept:0", "the Braga flat with Mariabelle", nil),
		item(kept, "message", "changed:0", "the Faro flat with Mariabelle", nil),
		item(bob, "message", "bob:0", "the Evora flat with Mariabelle", nil),
	}
	if err := s.AddItems(ctx, textOnly); err != nil {
		t.Fatalf("AddItems: %v", err)
	}
	for _, id := range []memory.Identity{cx, def} {
		if err := s.DeleteConversation(ctx, id); err != nil {
			t.Fatalf("DeleteConversation %s: %v", id.Conversation, err)
		}
		mustSave(t, s, simple(t, id, 2)) // the same name, started again
	}
	if err := s.DeleteUser(ctx, bob.Tenant, bob.User); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	late := make([]memory.Item, len(textOnly))
	for i, it := range textOnly {
		it.Embedding, it.Model, it.Dims = vec4(1, 0, 0, 0), testModel, 4
		late[i] = it
	}
	late[3].Text = "a text the row no longer holds"
	if err := s.EmbedItems(ctx, late); err != nil {
		t.Fatalf("EmbedItems: %v", err)
	}
	for _, u := range []string{"alice", "bob"} {
		q := memory.ItemQuery{Tenant: "acme", User: u, Text: "Mariabelle", Limit: 10}
		got := refs(mustSearchText(t, s, q))
		slices.Sort(got)
		want := []string{"changed:0", "kept:0"}
		if u == "bob" {
			want = nil
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s's items after EmbedItems = %q, want %q (nothing deleted written again)", u, got, want)
		}
	}
	q := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: vec4(1, 0, 0, 0), Model: testModel, Dims: 4, Limit: 10}
	if got := refs(mustSearchVector(t, s, q)); !slices.Equal(got, []string{"kept:0"}) {
		t.Fatalf("items found by vector = %q, want only the stored row of the same text", got)
	}
}
