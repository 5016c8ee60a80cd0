package postgres

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestFactItemsFollowTheirFact covers the recall items made from facts
// (kind "fact", Ref = fact id): superseding, capping or deleting a fact
// removes its item from search, so a stale fact is never recalled.
func TestFactItemsFollowTheirFact(t *testing.T) {
	s := mustOpen(t)
	ctx := testCtx(t)
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	upsert := func(key, value string, n int, maxPerUser int) memory.Fact {
		t.Helper()
		f, err := s.UpsertFact(ctx, memory.Fact{Tenant: "acme", User: "alice", Type: memory.FactProfile,
			Key: key, Value: value, Confidence: 0.5, UpdatedAt: at.Add(time.Duration(n) * time.Second)}, maxPerUser)
		if err != nil {
			t.Fatalf("UpsertFact(%s=%s): %v", key, value, err)
		}
		if err := s.AddItems(ctx, []memory.Item{{Tenant: "acme", User: "alice", Kind: "fact",
			Ref: strconv.FormatInt(f.ID, 10), Text: key + ": " + value}}); err != nil {
			t.Fatalf("AddItems: %v", err)
		}
		return f
	}
	search := func(text string) []string {
		t.Helper()
		items, err := s.SearchText(ctx, memory.ItemQuery{Tenant: "acme", User: "alice", Text: text, Limit: 10})
		if err != nil {
			t.Fatalf("SearchText: %v", err)
		}
		var out []string
		for _, it := range items {
			out = append(out, it.Text)
		}
		return out
	}

	upsert("city", "Lisbon", 0, 0)
	porto := upsert("city", "Porto", 1, 0)
	if got := search("city Lisbon Porto"); len(got) != 1 || got[0] != "city: Porto" {
		t.Fatalf("after moving to Porto, search = %q, want only the current fact", got)
	}

	upsert("drink", "tea", 2, 0)
	upsert("food", "fish", 3, 2) // two current facts allowed: Porto (oldest, 1 mention) goes
	if got := search("city Porto"); len(got) != 0 {
		t.Fatalf("after the cap evicted Porto, search = %q, want nothing", got)
	}
	if err := s.DeleteFact(ctx, "acme", "alice", porto.ID); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("DeleteFact of an evicted fact = %v, want memory.ErrNotFound", err)
	}

	food, err := s.Facts(ctx, "acme", "alice", at, false)
	if err != nil || len(food) != 2 || food[0].Value != "fish" || food[1].Value != "tea" {
		t.Fatalf("Facts = %+v, %v; want fish and tea", food, err)
	}
	if err := s.DeleteFact(ctx, "acme", "alice", food[0].ID); err != nil {
		t.Fatalf("DeleteFact: %v", err)
	}
	if got := search("food fish"); len(got) != 0 {
		t.Fatalf("after DeleteFact, search = %q, want nothing", got)
	}
}

// TestRestatedFactKeepsAConcurrentUnpin unpins a pinned fact in a
// transaction that commits while a restatement of it (not pinned itself)
// waits to write the row: the restatement ORs its own pin into the row it
// updates, read again then, so the unpin stands (it must not OR in the
// pin it read before the unpin committed).
func TestRestatedFactKeepsAConcurrentUnpin(t *testing.T) {
	ctx := testCtx(t)
	s := mustOpen(t)
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	fact := memory.Fact{Tenant: "acme", User: "alice", Type: memory.FactProfile, Key: "city", Value: "Porto", Confidence: 0.5, UpdatedAt: at}
	pinned := fact
	pinned.Pinned = true
	f, err := s.UpsertFact(ctx, pinned, 0)
	if err != nil || !f.Pinned {
		t.Fatalf("UpsertFact(pinned) = %+v, %v", f, err)
	}

	// SetFactPinned's statement, committed below.
	unpin, unpinPID := holdInTx(t, s, `UPDATE facts SET pinned = false
		WHERE tenant = 'acme' AND user_id = 'alice' AND id = $1 AND superseded_at IS NULL`, f.ID)

	done := make(chan error, 1)
	go func() {
		restated := fact
		restated.UpdatedAt = at.Add(time.Minute)
		_, err := s.UpsertFact(ctx, restated, 0)
		done <- err
	}()
	// Wait for the restatement to queue behind the unpin's row lock.
	waitForLockWaiters(t, s, unpinPID, 1)
	if err := unpin.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("UpsertFact(restated): %v", err)
	}
	facts, err := s.Facts(ctx, "acme", "alice", at, false)
	if err != nil || len(facts) != 1 {
		t.Fatalf("Facts = %+v, %v; want the one fact", facts, err)
	}
	if facts[0].Pinned || facts[0].Mentions != 2 {
		t.Errorf("after an unpin and a restatement: pinned %v, mentions %d; want unpinned, 2 mentions", facts[0].Pinned, facts[0].Mentions)
	}
}

// TestUnpinDuringARestatementWithANewValue: a restatement with a new
// value supersedes the fact, and the new fact inherits the pin it read. An
// unpin that commits between that read and the supersede came back
// (reported done, the new current fact still pinned); SetFactPinned now
// holds the user's fact lock, so the restatement reads the unpinned fact.
// A transaction holding the old fact's row makes both queue there, the
// unpin first, and pg_stat_activity tells when each waits (no timing).
func TestUnpinDuringARestatementWithANewValue(t *testing.T) {
	ctx := testCtx(t)
	s := mustOpen(t)
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	old, err := s.UpsertFact(ctx, memory.Fact{Tenant: "acme", User: "carol", Type: memory.FactProfile, Key: "city",
		Value: "Porto", Confidence: 0.5, UpdatedAt: at, Pinned: true}, 0)
	if err != nil || !old.Pinned {
		t.Fatalf("UpsertFact(pinned) = %+v, %v", old, err)
	}
	hold, holdPID := holdInTx(t, s, `SELECT 1 FROM facts WHERE id = $1 FOR UPDATE`, old.ID)
	unpinned := make(chan error, 1)
	go func() { unpinned <- s.SetFactPinned(ctx, "acme", "carol", old.ID, false) }()
	waitForLockWaiters(t, s, holdPID, 1)
	restated := make(chan error, 1)
	go func() {
		_, err := s.UpsertFact(ctx, memory.Fact{Tenant: "acme", User: "carol", Type: memory.FactProfile, Key: "city",
			Value: "Lisbon", Confidence: 0.5, UpdatedAt: at.Add(time.Minute)}, 0)
		restated <- err
	}()
	waitForLockWaiters(t, s, holdPID, 2)
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-unpinned; err != nil {
		t.Fatalf("SetFactPinned(false) = %v", err)
	}
	if err := <-restated; err != nil {
		t.Fatalf("UpsertFact(new value) = %v", err)
	}
	facts, err := s.Facts(ctx, "acme", "carol", at, false)
	if err != nil || len(facts) != 1 || facts[0].Value != "Lisbon" {
		t.Fatalf("Facts = %+v, %v; want the one current fact, Lisbon", facts, err)
	}
	if facts[0].Pinned {
		t.Errorf("the unpin reported done, yet the current fact is pinned: %+v", facts[0])
	}
}
