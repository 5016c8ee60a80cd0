package recall

import (
	"context"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

var _ OwnedEmbedder = (*Cached)(nil)

// settled waits until c has no call in flight: its vectors are cached.
func settled(t *testing.T, c *Cached) {
	t.Helper()
	waitFor(t, "the flights to settle", func() bool { c.mu.Lock(); defer c.mu.Unlock(); return len(c.inflight) == 0 })
}

// TestCachedKeepsEachOwnersVectorsApart: a text one user embedded is a
// cache hit for that user alone; the same text is embedded again for
// another tenant's user of the same name, another user of the same tenant
// and a call on nobody's behalf, so that its latency tells none of them
// what the first embedded.
func TestCachedKeepsEachOwnersVectorsApart(t *testing.T) {
	const text = "my diagnosis is confidential"
	g := newGated()
	close(g.gate)
	c := NewCached(g, &memCache{}, nil)
	ctx := context.Background()
	embedAs := func(t *testing.T, o Owned) {
		t.Helper()
		vecs, err := c.EmbedOwned(ctx, []Owned{o}, time.Time{})
		if err != nil || len(vecs) != 1 || len(vecs[0]) != 8 {
			t.Fatalf("EmbedOwned = %v, %v", vecs, err)
		}
		settled(t, c)
	}
	embedAs(t, Owned{Tenant: "t1", User: "alice", Text: text})
	for _, tc := range []struct {
		name  string
		owner Owned
		miss  bool
	}{
		{"the same user", Owned{Tenant: "t1", User: "alice"}, false},
		{"another tenant's user of the same name", Owned{Tenant: "t2", User: "alice"}, true},
		{"another user of the same tenant", Owned{Tenant: "t1", User: "bob"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := g.count(text)
			o := tc.owner
			o.Text = text
			embedAs(t, o)
			if after, _ := g.count(text); (after > before) != tc.miss {
				t.Fatalf("embedded %d times more, want a miss: %v", after-before, tc.miss)
			}
		})
	}
	t.Run("nobody", func(t *testing.T) {
		before, _ := g.count(text)
		if _, err := c.Embed(ctx, []string{text}, time.Time{}); err != nil {
			t.Fatal(err)
		}
		if after, _ := g.count(text); after == before {
			t.Fatal("a call on nobody's behalf found a user's vector")
		}
	})
}

// TestCachedJoinsOnlyTheOwnersFlight: a text being embedded for one user
// is embedded anew for another, not waited for: joining would answer the
// second as soon as the first's call returns.
func TestCachedJoinsOnlyTheOwnersFlight(t *testing.T) {
	const text = "what did my lawyer say?"
	g := newGated()
	c := NewCached(g, &memCache{}, nil)
	ctx := context.Background()
	errs := make(chan error, 2)
	for _, user := range []string{"alice", "bob"} {
		go func() {
			_, err := c.EmbedOwned(ctx, []Owned{{Tenant: "t", User: user, Text: text}}, time.Time{})
			errs <- err
		}()
	}
	waitFor(t, "one call per user", func() bool { n, _ := g.count(text); return n == 2 })
	close(g.gate)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestEmbeddingCallersNameTheOwner: the searcher, the recaller (ranking
// facts) and the indexer embed on behalf of the user they serve: what one
// user embedded through them is embedded again for another, and found in
// the cache for the same user.
func TestEmbeddingCallersNameTheOwner(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		embed func(t *testing.T, emb Embedder, tenant, user string)
	}{
		{"searcher", func(t *testing.T, emb Embedder, tenant, user string) {
			s := NewSearcher(newFakeStore(), emb, SearchOptions{TopK: 5, WholeQuery: true})
			if _, err := s.Search(ctx, SearchQuery{Tenant: tenant, User: user, Text: "where does my sister live?"}); err != nil {
				t.Fatal(err)
			}
		}},
		{"recaller", func(t *testing.T, emb Embedder, tenant, user string) {
			st := newFakeStore()
			st.facts = []memory.Fact{{Tenant: tenant, User: user, Type: memory.FactGoal, Key: "goal", Value: "visit temples"}}
			r := NewRecaller(st, NewSearcher(st, emb, SearchOptions{TopK: 5, WholeQuery: true}), emb, RecallOptions{FactsMax: 5})
			if _, err := r.Recall(ctx, memory.RecallQuery{Identity: memory.Identity{Tenant: tenant, User: user, Conversation: "c"}, Text: "what are my plans?"}); err != nil {
				t.Fatal(err)
			}
		}},
		{"indexer", func(t *testing.T, emb Embedder, tenant, user string) {
			ix := NewIndexer(newFakeStore(), emb, nil)
			if err := ix.IndexFact(ctx, memory.Fact{ID: 1, Tenant: tenant, User: user, Type: memory.FactGoal, Key: "goal", Value: "visit temples", UpdatedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGated()
			close(g.gate)
			c := NewCached(g, &memCache{}, nil)
			texts := func() int {
				g.mu.Lock()
				defer g.mu.Unlock()
				n := 0
				for _, k := range g.texts {
					n += k
				}
				return n
			}
			tc.embed(t, c, "t1", "alice")
			settled(t, c)
			for _, o := range []struct {
				tenant, user string
				miss         bool
			}{{"t1", "alice", false}, {"t2", "alice", true}, {"t1", "bob", true}} {
				before := texts()
				tc.embed(t, c, o.tenant, o.user)
				settled(t, c)
				if after := texts(); (after > before) != o.miss {
					t.Errorf("%s/%s: embedded %d texts, want a miss: %v", o.tenant, o.user, after-before, o.miss)
				}
			}
		})
	}
}
