package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// testSupersededItemsLeaveSearch covers memory items of messages that an
// edit or a regeneration superseded: SaveExchange removes them from vector
// and full-text search in the same transaction, a late AddItems of such a
// message (the indexer running after the supersession) stores nothing, and
// the live branch's items, the new branch's and other users' stay.
func testSupersededItemsLeaveSearch(t *testing.T, s KnowledgeStore) {
	alice := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	bob := memory.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}
	// itemsOf indexes the two messages of a simple exchange the way the
	// indexer does: kind "message", Ref the message key.
	itemsOf := func(id memory.Identity, ex memory.Exchange, n int) []memory.Item {
		w := float32(n) / 10
		return []memory.Item{
			item(id, "message", memory.Key(ex.ID, 0), "lighthouse question "+ex.ID, vec4(1, w, 0, 0)),
			item(id, "message", memory.Key(ex.ID, 1), "lighthouse answer "+ex.ID, vec4(1, 0, w, 0)),
		}
	}
	var aliceEx []memory.Exchange
	for _, id := range []memory.Identity{alice, bob} {
		for n := 1; n <= 2; n++ {
			ex := simple(t, id, n)
			mustSave(t, s, ex)
			mustAddItems(t, s, itemsOf(id, ex, n)...)
			if id == alice {
				aliceEx = append(aliceEx, ex)
			}
		}
	}

	// Regenerating the second answer resends [q1, a1] with q2 as the turn:
	// q2 and a2 as stored (seq 3 and 4) are superseded, q2 and a new answer
	// are stored under the exchange "regen".
	regen := exchange(alice, "regen", 3,
		[]memory.Message{msg(t, "user", "question 1"), msg(t, "assistant", "answer 1")},
		[]memory.Message{msg(t, "user", "question 2")}, msg(t, "assistant", "answer 2 again"))
	if res := mustSave(t, s, regen); res.Superseded != 2 {
		t.Fatalf("regenerate: Superseded = %d, want 2", res.Superseded)
	}
	old := []string{memory.Key(aliceEx[1].ID, 0), memory.Key(aliceEx[1].ID, 1)}
	live := []string{memory.Key(aliceEx[0].ID, 0), memory.Key(aliceEx[0].ID, 1)}

	q := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: vec4(1, 0.2, 0.2, 0), Model: testModel, Dims: 4,
		Text: "lighthouse", Limit: 10}
	assertRefSet := func(what string, want []string) {
		t.Helper()
		for _, search := range []struct {
			name string
			got  []memory.Item
		}{
			{"SearchVector", mustSearchVector(t, s, q)},
			{"SearchText", mustSearchText(t, s, q)},
		} {
			got := refs(search.got)
			slices.Sort(got)
			w := slices.Clone(want)
			slices.Sort(w)
			if !slices.Equal(got, w) {
				t.Fatalf("%s %s = %q, want %q (superseded %q)", search.name, what, got, w, old)
			}
		}
	}
	assertRefSet("after the regeneration", live)

	// The indexer runs late: it indexes the superseded exchange (and the
	// new one) only now.
	mustAddItems(t, s, itemsOf(alice, aliceEx[1], 2)...)
	mustAddItems(t, s, itemsOf(alice, regen, 3)...)
	assertRefSet("after a late index of the superseded branch",
		append(slices.Clone(live), memory.Key(regen.ID, 0), memory.Key(regen.ID, 1)))

	// Bob's conversation of the same id is untouched.
	bq := q
	bq.User = "bob"
	if got := mustSearchVector(t, s, bq); len(got) != 4 {
		t.Fatalf("SearchVector for bob = %q, want his 4 items", refs(got))
	}
	// Unembedded items of the superseded branch are not offered to reindex.
	for _, it := range mustItemsToEmbedAll(t, s) {
		if slices.Contains(old, it.Ref) && it.User == "alice" {
			t.Fatalf("ItemsToEmbed returns superseded item %s", it.Ref)
		}
	}
}

// mustItemsToEmbedAll returns every item ItemsToEmbed offers for a model no
// item uses.
func mustItemsToEmbedAll(tb testing.TB, s Knowledge) []memory.Item {
	tb.Helper()
	got, err := s.ItemsToEmbed(testCtx(tb), "another-model", 4, 0, 1000)
	if err != nil {
		tb.Fatalf("ItemsToEmbed: %v", err)
	}
	return got
}

// testLateIndexRacesSupersession runs the indexer's AddItems of an exchange
// concurrently with the regeneration that supersedes it, many times: whichever
// commits first, the superseded messages' items end up out of search.
func testLateIndexRacesSupersession(t *testing.T, s KnowledgeStore) {
	const rounds = 20
	for r := range rounds {
		id := memory.Identity{Tenant: "acme", User: "alice", Conversation: fmt.Sprintf("race%d", r)}
		mustSave(t, s, simple(t, id, 1))
		second := simple(t, id, 2)
		mustSave(t, s, second)
		regen := exchange(id, fmt.Sprintf("regen-%d", r), 3,
			[]memory.Message{msg(t, "user", "question 1"), msg(t, "assistant", "answer 1")},
			[]memory.Message{msg(t, "user", "question 2")}, msg(t, "assistant", "answer 2 again"))
		late := []memory.Item{
			item(id, "message", memory.Key(second.ID, 0), "lighthouse question two", vec4(1, 0, 0, 0)),
			item(id, "message", memory.Key(second.ID, 1), "lighthouse answer two", vec4(1, 0.1, 0, 0)),
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		wg.Go(func() { errs[0] = s.AddItems(testCtx(t), late) })
		wg.Go(func() { _, errs[1] = s.SaveExchange(testCtx(t), regen) })
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", r, err)
		}
		q := memory.ItemQuery{Tenant: "acme", User: "alice", Conversation: id.Conversation,
			Embedding: vec4(1, 0, 0, 0), Model: testModel, Dims: 4, Text: "lighthouse", Limit: 10}
		if got := mustSearchVector(t, s, q); len(got) != 0 {
			t.Fatalf("round %d: SearchVector = %q, want none (their messages are superseded)", r, refs(got))
		}
		if got := mustSearchText(t, s, q); len(got) != 0 {
			t.Fatalf("round %d: SearchText = %q, want none (their messages are superseded)", r, refs(got))
		}
	}
}
