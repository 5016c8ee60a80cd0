package cache_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
)

// countingStore counts the SQL reads of a conversation's newest turns.
type countingStore struct {
	*sqlite.Store
	recent *atomic.Int64
}

func (c countingStore) Recent(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error) {
	c.recent.Add(1)
	return c.Store.Recent(ctx, id, n)
}

// TestSavesAdvanceTheTail: a save whose result names the count before it
// (TailKnown) appends what it stored to the tail held, so the next
// request's Recent reads nothing; one that does not (a store that cannot
// tell), or one that superseded turns, leaves the next Recent to read
// again; and a read without Revisions always reads through.
func TestSavesAdvanceTheTail(t *testing.T) {
	ctx := context.Background()
	st := openSQLite(t, "")
	var reads atomic.Int64
	r := cache.NewReads(countingStore{st, &reads}, nil, cache.DefaultTailBytes, cache.DefaultKnowledgeBytes)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	n := 0
	save := func(prior []memory.Message, known bool) {
		t.Helper()
		n++
		ex := memory.Exchange{ID: "ex" + string(rune('a'+n)), Identity: id, At: time.Now(), Prior: prior,
			Turn:  []memory.Message{{Role: "user", Content: "q" + string(rune('a'+n))}},
			Reply: memory.Message{Role: "assistant", Content: "a" + string(rune('a'+n))}}
		res, err := st.SaveExchange(ctx, ex)
		if err != nil {
			t.Fatal(err)
		}
		res.TailKnown = res.TailKnown && known
		r.Saved(ex, res)
	}
	recent := func(step string, wantReads int64) []memory.Message {
		t.Helper()
		rev, err := st.ItemRevisions(ctx, id.Tenant, id.User)
		if err != nil {
			t.Fatal(err)
		}
		before := reads.Load()
		got, err := r.Recent(ctx, &rev, id, 20)
		if err != nil {
			t.Fatal(err)
		}
		want, err := st.Recent(ctx, id, 20)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(got, want, func(a, b memory.Message) bool { return a.Seq == b.Seq && a.Content == b.Content }) {
			t.Fatalf("%s: Recent = %v, want %v", step, got, want)
		}
		if n := reads.Load() - before; n != wantReads {
			t.Fatalf("%s: %d SQL reads, want %d", step, n, wantReads)
		}
		return got
	}
	save(nil, true)
	recent("first", 1)
	recent("unchanged", 0)
	save(nil, true)
	recent("after a save that names the count before it", 0)
	save(nil, false)
	recent("after a save that does not", 1)
	held := recent("held again", 0)
	save(held[:2], true) // a regeneration: supersedes the turns after the first exchange
	recent("after a regeneration", 1)
	before := reads.Load()
	if _, err := r.Recent(ctx, nil, id, 20); err != nil {
		t.Fatal(err)
	}
	if reads.Load() != before+1 {
		t.Fatal("a Recent without revisions did not read the store")
	}
}

// TestWritesReachTheReads: a save made through the Reads advances the tail
// held, so the next Recent reads nothing from the store; an erasure made
// through them drops what is held of the user, so their next read (even at
// a revision the erasure would not have moved) reads the store again.
func TestWritesReachTheReads(t *testing.T) {
	ctx := context.Background()
	st := openSQLite(t, "")
	var reads atomic.Int64
	r := cache.NewReads(countingStore{st, &reads}, nil, cache.DefaultTailBytes, cache.DefaultKnowledgeBytes)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	recent := func(step string, rev memory.Revisions, wantReads int64) {
		t.Helper()
		before := reads.Load()
		if _, err := r.Recent(ctx, &rev, id, 20); err != nil {
			t.Fatal(err)
		}
		if n := reads.Load() - before; n != wantReads {
			t.Fatalf("%s: %d SQL reads, want %d", step, n, wantReads)
		}
	}
	revs := func() memory.Revisions {
		t.Helper()
		rev, err := st.ItemRevisions(ctx, id.Tenant, id.User)
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	for i, batch := range []bool{false, true} {
		recent("before the save", revs(), 1)
		ex := memory.Exchange{ID: "ex" + string(rune('a'+i)), Identity: id, At: time.Now(),
			Turn:  []memory.Message{{Role: "user", Content: "question"}},
			Reply: memory.Message{Role: "assistant", Content: "answer"}}
		var err error
		if batch {
			_, err = r.SaveExchanges(ctx, []memory.Exchange{ex})
		} else {
			_, err = r.SaveExchange(ctx, ex)
		}
		if err != nil {
			t.Fatal(err)
		}
		recent("after the save", revs(), 0)
		held := revs()
		if err := r.DeleteUser(ctx, id.Tenant, id.User); err != nil {
			t.Fatal(err)
		}
		recent("after the erasure, at the revision from before it", held, 1)
	}
}
