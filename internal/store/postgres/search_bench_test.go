package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/testenv"
)

// mustBenchCorpus stores, for each of users users of tenant t0, perUser
// items of 384-dimension random vectors and texts of 8 to 39 words drawn
// (Zipf-distributed) from a 2,000-word vocabulary, and returns the store.
func mustBenchCorpus(b *testing.B, users, perUser int) *Store {
	b.Helper()
	s := mustOpenURL(b, testenv.PostgresURL(b))
	r := rand.New(rand.NewPCG(3, 4))
	zipf := rand.NewZipf(r, 1.1, 1, 1999)
	var items []memory.Item
	for u := range users {
		for i := range perUser {
			words := make([]string, 8+r.IntN(32))
			for w := range words {
				words[w] = fmt.Sprintf("w%d", zipf.Uint64())
			}
			items = append(items, memory.Item{Tenant: "t0", User: fmt.Sprintf("u%d", u), Conversation: fmt.Sprintf("c%d", i%3),
				Kind: "message", Ref: fmt.Sprintf("k%d", i), Text: strings.Join(words, " "),
				Embedding: randomVector(r, 384), Model: "local", Dims: 384})
		}
	}
	for len(items) > 0 {
		n := min(len(items), 500)
		if err := s.AddItems(testCtx(b), items[:n]); err != nil {
			b.Fatalf("AddItems: %v", err)
		}
		items = items[n:]
	}
	if _, err := s.pool.Exec(testCtx(b), "ANALYZE"); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkSearch measures one user's top-10 vector and text searches,
// at 100 and 1,000 items per user (20 users), through the in-memory index
// (warm: the user's items unchanged since the last search, as in a
// conversation's consecutive turns) and through the SQL statements it
// replaced, which remain the path of a user too large for the index.
func BenchmarkSearch(b *testing.B) {
	for _, perUser := range []int{100, 1000} {
		s := mustBenchCorpus(b, 20, perUser)
		r := rand.New(rand.NewPCG(9, 9))
		ctx := context.Background()
		q := memory.ItemQuery{Tenant: "t0", User: "u7", Model: "local", Dims: 384, Limit: 10,
			Embedding: randomVector(r, 384), Text: "w1 w17 w230 w1500 what did we say"}
		for _, bm := range []struct {
			name   string
			search func(context.Context, memory.ItemQuery) ([]memory.Item, error)
		}{
			{"vector/index", s.SearchVector},
			{"vector/sql", s.searchVectorSQLPath},
			{"text/index", s.SearchText},
			{"text/sql", s.SQL().SearchText},
		} {
			b.Run(fmt.Sprintf("%s/%d-per-user", bm.name, perUser), func(b *testing.B) {
				for b.Loop() {
					items, err := bm.search(ctx, q)
					if err != nil || len(items) == 0 {
						b.Fatalf("search: %d items, %v", len(items), err)
					}
				}
			})
		}
	}
}
