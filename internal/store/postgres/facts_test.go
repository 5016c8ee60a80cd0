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
