package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// RunErasure runs the erasure contract: DeleteUser leaves a tombstone that
// ErasedAt reports, and every write guarded (memory.Fact.GuardSince) for
// data captured at or before the erasure is refused — UpsertFact and
// SaveSummary with memory.ErrErased, AddItems by skipping the user's items —
// in whatever order the write and the erasure happen, while writes for data
// captured after it (a fresh start), unguarded writes and other users'
// writes go through. open must return a fresh, empty store for every call.
//
// In full, every store: drops (SaveExchange's Dropped) an exchange whose At
// is at or before the user's erasure, however late it is processed; under
// a guard, also refuses a fact (memory.ErrErased) and skips an item that
// names a conversation, other than the default one, deleted after the
// exchange was captured (DeleteConversation ran since); and stores the
// exchanges of a user who chats again after the erasure as a new user's.
// A store checks the tombstone in the write's own transaction, so no
// erasure commits between the check and the write.
func RunErasure(t *testing.T, open func(t *testing.T) KnowledgeStore) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, s KnowledgeStore)
	}{
		{"ErasedAtReportsTheTombstone", testErasedAt},
		{"GuardRefusesWritesCapturedBeforeErasure", testGuardRefusesStaleWrites},
		{"FreshStartAfterErasure", testFreshStartAfterErasure},
		{"GuardedWritesRaceErasure", testGuardedWritesRaceErasure},
		{"DeletedConversationStaysDeleted", testDeletedConversationStaysDeleted},
		{"ConversationDeletedBeforeItsFirstSave", testDeletedBeforeItsFirstSave},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, open(t))
		})
	}
}

func testErasedAt(t *testing.T, s KnowledgeStore) {
	ctx := testCtx(t)
	if at, err := s.ErasedAt(ctx, "acme", "alice"); err != nil || !at.IsZero() {
		t.Fatalf("ErasedAt of a user never erased = %v, %v; want zero", at, err)
	}
	before := time.Now().Truncate(time.Microsecond)
	if err := s.DeleteUser(ctx, "acme", "alice"); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	after := time.Now()
	first, err := s.ErasedAt(ctx, "acme", "alice")
	if err != nil || first.Before(before) || first.After(after) {
		t.Fatalf("ErasedAt = %v, %v; want within [%v, %v]", first, err, before, after)
	}
	if at, err := s.ErasedAt(ctx, "other", "alice"); err != nil || !at.IsZero() {
		t.Fatalf("ErasedAt of the same user id in another tenant = %v, %v; want zero", at, err)
	}
	if err := s.DeleteUser(ctx, "acme", "alice"); err != nil {
		t.Fatalf("second DeleteUser: %v", err)
	}
	if again, err := s.ErasedAt(ctx, "acme", "alice"); err != nil || again.Before(first) {
		t.Fatalf("ErasedAt after a second erasure = %v, %v; want not before %v", again, err, first)
	}
}

// seedUser stores an exchange captured at at, a fact, a summary and an item
// for id, all mentioning word.
func seedUser(t *testing.T, s KnowledgeStore, id memory.Identity, at time.Time, word string) {
	t.Helper()
	ex := memory.Exchange{ID: seededID(id, at), Identity: id, At: at,
		Turn:  []memory.Message{msg(t, "user", "I live in "+word+" and I am vegan")},
		Reply: msg(t, "assistant", "Noted, "+word)}
	if res := mustSave(t, s, ex); res.Inserted != 2 {
		t.Fatalf("seed %s: %+v", id.User, res)
	}
}

// seededID is the id of the exchange seedUser stores.
func seededID(id memory.Identity, at time.Time) string {
	return fmt.Sprintf("ex-%s-%d", id.User, at.UnixNano())
}

// guardedFact is a fact the hooks write from the exchange seedUser stored
// for id at at: stated in its user message, guarded from at.
func guardedFact(id memory.Identity, value string, at time.Time) memory.Fact {
	return memory.Fact{Tenant: id.Tenant, User: id.User, Conversation: id.Conversation, Source: memory.Key(seededID(id, at), 0),
		Type: memory.FactProfile, Key: "city", Value: value, Confidence: 0.9, CreatedAt: at, UpdatedAt: at, GuardSince: at}
}

// guardedSummary is version v of the summary the hooks write from the
// exchange seedUser stored for id at at: through its reply, guarded from at.
func guardedSummary(id memory.Identity, v int, text string, at time.Time) memory.Summary {
	return memory.Summary{Tenant: id.Tenant, User: id.User, Conversation: id.Conversation, Version: v, FromSeq: 1, ToSeq: 2,
		Text: text, CreatedAt: time.Now(), GuardSince: at, Through: memory.Key(seededID(id, at), 1)}
}

// guardedItem is item, written by a hook for exchanges captured at since
// (memory.Item.GuardSince).
func guardedItem(id memory.Identity, kind, ref, text string, vec []float32, since time.Time) memory.Item {
	it := item(id, kind, ref, text, vec)
	it.GuardSince = since
	return it
}

func testGuardRefusesStaleWrites(t *testing.T, s KnowledgeStore) {
	ctx := testCtx(t)
	alice := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	bob := memory.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}
	captured := time.Now().Add(-time.Second)
	seedUser(t, s, alice, captured, "Porto")
	seedUser(t, s, bob, captured, "Lisbon")
	// The hooks of alice's exchange start before the erasure ...
	if err := s.DeleteUser(ctx, alice.Tenant, alice.User); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	// ... and write after it.
	if _, err := s.UpsertFact(ctx, guardedFact(alice, "Porto", captured), 0); !errors.Is(err, memory.ErrErased) {
		t.Fatalf("guarded UpsertFact of an erased user = %v, want ErrErased", err)
	}
	err := s.SaveSummary(ctx, guardedSummary(alice, 1, "lives in Porto", captured))
	if !errors.Is(err, memory.ErrErased) {
		t.Fatalf("guarded SaveSummary of an erased user = %v, want ErrErased", err)
	}
	if err := s.AddItems(ctx, []memory.Item{
		guardedItem(alice, "message", memory.Key(seededID(alice, captured), 0), "I live in Porto", vec4(1, 0, 0, 0), captured),
		guardedItem(bob, "message", memory.Key(seededID(bob, captured), 0), "I live in Lisbon", vec4(1, 0, 0, 0), captured),
	}); err != nil {
		t.Fatalf("guarded AddItems: %v", err)
	}
	// The same guard lets bob, who was not erased, write.
	mustUpsertFact(t, s, guardedFact(bob, "Lisbon", captured), 0)

	assertValues(t, "alice's facts", mustFacts(t, s, alice.Tenant, alice.User, time.Now(), true))
	assertValues(t, "bob's facts", mustFacts(t, s, bob.Tenant, bob.User, time.Now(), true), "Lisbon")
	assertRefs(t, "alice's items", mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "alice", Text: "Porto", Limit: 5}), nil)
	assertRefs(t, "bob's items", mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "bob", Text: "Lisbon", Limit: 5}),
		[]string{memory.Key(seededID(bob, captured), 0)})
	if _, err := s.LatestSummary(ctx, alice); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("alice's summary after erasure: %v, want ErrNotFound", err)
	}
	if convs := mustConversations(t, s, alice.Tenant, alice.User); len(convs) != 0 {
		t.Fatalf("alice's conversations after erasure: %+v", convs)
	}
	// A capture of the same exchange time processed now is dropped too.
	late := memory.Exchange{ID: "late", Identity: alice, At: captured,
		Turn: []memory.Message{msg(t, "user", "I live in Porto")}, Reply: msg(t, "assistant", "ok")}
	if res := mustSave(t, s, late); !res.Dropped {
		t.Fatalf("late capture of an erased user = %+v, want Dropped", res)
	}
}

func testFreshStartAfterErasure(t *testing.T, s KnowledgeStore) {
	ctx := testCtx(t)
	alice := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	seedUser(t, s, alice, time.Now().Add(-time.Second), "Porto")
	if err := s.DeleteUser(ctx, alice.Tenant, alice.User); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	erased, err := s.ErasedAt(ctx, alice.Tenant, alice.User)
	if err != nil || erased.IsZero() {
		t.Fatalf("ErasedAt = %v, %v", erased, err)
	}
	// New traffic after the erasure is a fresh start.
	fresh := erased.Add(time.Millisecond)
	seedUser(t, s, alice, fresh, "Braga")
	mustUpsertFact(t, s, guardedFact(alice, "Braga", fresh), 0)
	if err := s.SaveSummary(ctx, guardedSummary(alice, 1, "lives in Braga", fresh)); err != nil {
		t.Fatalf("SaveSummary after a fresh start: %v", err)
	}
	mustAddItems(t, s, item(alice, "message", "fresh:0", "I live in Braga", vec4(1, 0, 0, 0)))
	if _, err := s.UpsertFact(ctx, guardedFact(alice, "Braga", fresh), 0); err != nil {
		t.Fatalf("guarded UpsertFact after a fresh start: %v", err)
	}
	assertValues(t, "facts after a fresh start", mustFacts(t, s, alice.Tenant, alice.User, time.Now(), false), "Braga")
	assertRefs(t, "items after a fresh start", mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "alice", Text: "Braga", Limit: 5}), []string{"fresh:0"})
	if msgs := mustRecent(t, s, alice, 10); len(msgs) != 2 {
		t.Fatalf("messages after a fresh start: %d, want 2", len(msgs))
	}
	// An unguarded write (the management API, acting now) is not checked.
	mustUpsertFact(t, s, memory.Fact{Tenant: "acme", User: "alice", Type: memory.FactPreference, Key: "diet", Value: "vegan", Confidence: 1}, 0)
}

// testGuardedWritesRaceErasure runs writers that keep writing guarded
// facts, items and summaries for users captured before their erasure while
// the erasure happens: whatever the interleaving, nothing of those users is
// left once both are done.
func testGuardedWritesRaceErasure(t *testing.T, s KnowledgeStore) {
	const maxRaceWrites = 2000
	ctx := testCtx(t)
	const users = 4
	var wg sync.WaitGroup
	errs := make(chan error, users*2)
	for u := range users {
		id := memory.Identity{Tenant: "acme", User: fmt.Sprintf("user%d", u), Conversation: "c1"}
		captured := time.Now().Add(-time.Second)
		seedUser(t, s, id, captured, "Porto")
		wrote := make(chan struct{})
		wg.Add(2)
		go func() { // the hooks
			defer wg.Done()
			version := 1
			for i := 0; ; i++ {
				if i == maxRaceWrites {
					errs <- fmt.Errorf("%s: guarded writes still accepted after %d rounds", id.User, i)
					return
				}
				_, ferr := s.UpsertFact(ctx, guardedFact(id, fmt.Sprintf("Porto %d", i), captured), 0)
				ierr := s.AddItems(ctx, []memory.Item{guardedItem(id, "message", fmt.Sprintf("r%d:0", i), "I live in Porto", vec4(1, 0, 0, 0), captured)})
				serr := s.SaveSummary(ctx, guardedSummary(id, version, "lives in Porto", captured))
				if serr == nil {
					version++
				}
				if i == 0 {
					close(wrote)
				}
				if ierr != nil {
					errs <- fmt.Errorf("%s AddItems: %w", id.User, ierr)
					return
				}
				if errors.Is(ferr, memory.ErrErased) && errors.Is(serr, memory.ErrErased) {
					return // the erasure is seen; the hooks stop
				}
				if ferr != nil && !errors.Is(ferr, memory.ErrErased) {
					errs <- fmt.Errorf("%s UpsertFact: %w", id.User, ferr)
					return
				}
				if serr != nil && !errors.Is(serr, memory.ErrErased) && !errors.Is(serr, memory.ErrNotFound) {
					errs <- fmt.Errorf("%s SaveSummary: %w", id.User, serr)
					return
				}
			}
		}()
		go func() { // the operator
			defer wg.Done()
			select {
			case <-wrote:
			case <-ctx.Done():
				return
			}
			if err := s.DeleteUser(context.WithoutCancel(ctx), id.Tenant, id.User); err != nil {
				errs <- fmt.Errorf("%s DeleteUser: %w", id.User, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for u := range users {
		id := memory.Identity{Tenant: "acme", User: fmt.Sprintf("user%d", u), Conversation: "c1"}
		assertValues(t, id.User+" facts", mustFacts(t, s, id.Tenant, id.User, time.Now(), true))
		assertRefs(t, id.User+" items", mustSearchText(t, s, memory.ItemQuery{Tenant: id.Tenant, User: id.User, Text: "Porto", Limit: 50}), nil)
		assertRefs(t, id.User+" vectors", mustSearchVector(t, s, memory.ItemQuery{Tenant: id.Tenant, User: id.User,
			Embedding: vec4(1, 0, 0, 0), Model: testModel, Dims: 4, Limit: 50}), nil)
		if _, err := s.LatestSummary(ctx, id); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("%s summary after erasure: %v, want ErrNotFound", id.User, err)
		}
	}
}
