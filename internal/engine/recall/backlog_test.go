package recall

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/postgres"
	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/testenv"
)

// backlogStore is a real store the backlog tests index into.
type backlogStore interface {
	IndexStore
	SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error)
	SearchText(ctx context.Context, q memory.ItemQuery) ([]memory.Item, error)
	SearchVector(ctx context.Context, q memory.ItemQuery) ([]memory.Item, error)
	DeleteUser(ctx context.Context, tenant, user string) error
	DeleteConversation(ctx context.Context, id memory.Identity) error
	ItemsToEmbed(ctx context.Context, model string, dims int, afterID int64, limit int) ([]memory.Item, error)
	Close() error
}

// backlogStores make, for each kind of store, a function that opens it on
// one database: every call opens the same data again, as a restarted
// gateway does.
var backlogStores = map[string]func(t *testing.T) func() backlogStore{
	"sqlite": func(t *testing.T) func() backlogStore {
		path := filepath.Join(t.TempDir(), "memgate.db")
		return func() backlogStore {
			st, err := sqlite.Open(context.Background(), path, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		}
	},
	"postgres": func(t *testing.T) func() backlogStore {
		url := testenv.PostgresURL(t)
		return func() backlogStore {
			st, err := postgres.Open(context.Background(), url, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			return st
		}
	},
}

// roundCounter is a store that counts what each round of indexing writes
// to the full-text index, in index units (indexCost), and which
// conversations it writes to; before, when set, runs at the round's first
// write, once.
type roundCounter struct {
	backlogStore
	mu     sync.Mutex
	units  int
	seen   map[string]struct{}
	wrote  map[memory.Identity]int
	before func()
}

// begin starts a round.
func (s *roundCounter) begin() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.units, s.seen = 0, map[string]struct{}{}
}

func (s *roundCounter) AddItems(ctx context.Context, items []memory.Item) error {
	s.mu.Lock()
	before := s.before
	s.before = nil
	if s.seen == nil {
		s.seen = map[string]struct{}{}
	}
	if s.wrote == nil {
		s.wrote = map[memory.Identity]int{}
	}
	for _, it := range items {
		if it.Kind == KindMessage {
			s.units += indexCost(it.Text, s.seen)
			s.wrote[memory.Identity{Tenant: it.Tenant, User: it.User, Conversation: it.Conversation}]++
		}
	}
	s.mu.Unlock()
	if before != nil {
		before()
	}
	return s.backlogStore.AddItems(ctx, items)
}

// marker is the word only message i of a backlog test's history says.
func marker(i int) string {
	b := []byte("qqxz")
	for range 4 {
		b = append(b, byte('a'+i%26))
		i /= 26
	}
	return string(b)
}

// resentHistory is a first request that resends n-2 messages of history
// (about 400 bytes of distinct random words each, and its marker) before
// its turn and reply: about 125 index units a message, so 1,600 of them
// are twice what one exchange has indexed (exchangeIndexUnits).
func resentHistory(id memory.Identity, exID string, n int) memory.Exchange {
	msgs := make([]memory.Message, n)
	for i := range msgs {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs[i] = memory.Message{Role: role, Content: fmt.Sprintf("Message %d says %s. %s", i, marker(i), randomWords(uint64(i)+1, 400))}
	}
	return memory.Exchange{ID: exID, Identity: id, At: time.Now(), Prior: msgs[:n-2], Turn: msgs[n-2 : n-1], Reply: msgs[n-1]}
}

// saveAndIndex stores ex and runs the indexer over it, as the enricher's
// round does.
func saveAndIndex(t *testing.T, st backlogStore, ix *Indexer, ex memory.Exchange) {
	t.Helper()
	ctx := context.Background()
	res, err := st.SaveExchange(ctx, ex)
	if err != nil {
		t.Fatal(err)
	}
	res.GuardSince = ex.At // as the write path hands it to the hooks
	if err := ix.AfterSave(ctx, ex, res); err != nil {
		t.Fatal(err)
	}
}

// idleRounds runs the indexer's idle work (the enricher's Idle: Backfill)
// until it reports nothing left, at most limit rounds, checking that each
// round writes at most bound index units, and returns how many rounds
// did work.
func idleRounds(t *testing.T, st *roundCounter, ix *Indexer, limit, bound int) int {
	t.Helper()
	for round := range limit {
		st.begin()
		n, err := ix.Backfill(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st.units > bound {
			t.Fatalf("round %d wrote %d index units, want at most %d", round, st.units, bound)
		}
		if n == 0 {
			return round
		}
	}
	t.Fatalf("the idle work still reports work after %d rounds", limit)
	return 0
}

// found reports whether the full-text index finds message i of exchange
// exID of id's user by its marker.
func found(t *testing.T, st backlogStore, id memory.Identity, exID string, i int) bool {
	t.Helper()
	return foundWord(t, st, id, marker(i), memory.Key(exID, i))
}

// foundWord reports whether the full-text index finds a passage of the
// message of key in id's conversation by word.
func foundWord(t *testing.T, st backlogStore, id memory.Identity, word, key string) bool {
	t.Helper()
	hits, err := st.SearchText(context.Background(), memory.ItemQuery{Tenant: id.Tenant, User: id.User, Text: word, Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hits {
		if h.Kind == KindMessage && h.Ref == key && h.Conversation == id.Conversation && strings.Contains(h.Text, word) {
			return true
		}
	}
	return false
}

// foundByVector reports whether the vector search finds message i of ex
// by its own text.
func foundByVector(t *testing.T, st backlogStore, emb Embedder, ex memory.Exchange, i int) bool {
	t.Helper()
	all := append(append(append([]memory.Message{}, ex.Prior...), ex.Turn...), ex.Reply)
	vecs, err := emb.Embed(context.Background(), []string{all[i].Content}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	hits, err := st.SearchVector(context.Background(), memory.ItemQuery{Tenant: ex.Tenant, User: ex.User,
		Embedding: vecs[0], Model: emb.Model(), Dims: emb.Dims(), Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	return len(hits) == 1 && hits[0].Ref == memory.Key(ex.ID, i)
}

// A first request that resends a long chat (a team moving its chat app to
// memgate) is one exchange past what one round indexes: its newest
// messages are indexed at once, and the rest in later rounds of the
// enricher's idle work, each within its bound, until every message is
// found by full text and by its vector, the oldest too. The rest waits in
// the store, not in the process: a gateway restarted between the rounds
// indexes it all the same.
func TestBacklogIndexesAResentHistory(t *testing.T) {
	t.Parallel() // each case on its own SQLite file or PostgreSQL database
	const n = 1600
	for name, opener := range backlogStores {
		for _, restart := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/restart=%v", name, restart), func(t *testing.T) {
				t.Parallel()
				open := opener(t)
				emb := NewLocal(16)
				st := &roundCounter{backlogStore: open()}
				ix := NewIndexer(st, emb, nil)
				id := memory.Identity{Tenant: "t", User: "u", Conversation: "team-chat"}
				ex := resentHistory(id, "e1", n)
				st.begin()
				saveAndIndex(t, st, ix, ex)
				if st.units > exchangeIndexUnits {
					t.Fatalf("the exchange's round wrote %d index units, want at most %d", st.units, exchangeIndexUnits)
				}
				if !found(t, st, id, ex.ID, n-1) {
					t.Fatal("the newest message is not indexed at once")
				}
				if found(t, st, id, ex.ID, 0) {
					t.Fatal("the oldest message is indexed at once: the history fits one round and the test proves nothing")
				}
				if restart {
					st.begin()
					if _, err := ix.Backfill(context.Background()); err != nil {
						t.Fatal(err)
					}
					if err := st.Close(); err != nil {
						t.Fatal(err)
					}
					st = &roundCounter{backlogStore: open()}
					ix = NewIndexer(st, emb, nil)
				}
				rounds := idleRounds(t, st, ix, 1000, backlogIndexUnits)
				var missing []int
				for i := 0; i < n; i += 37 {
					if !found(t, st, id, ex.ID, i) {
						missing = append(missing, i)
					}
				}
				if !found(t, st, id, ex.ID, 0) || len(missing) > 0 {
					t.Fatalf("after %d idle rounds, messages %v are not found by full text (the oldest: %v)", rounds, missing, found(t, st, id, ex.ID, 0))
				}
				if restart {
					// What waited for a vector in the process waits for
					// `gateway reindex`.
					if _, err := Reindex(context.Background(), st, emb, 256, nil); err != nil {
						t.Fatal(err)
					}
				}
				if !foundByVector(t, st, emb, ex, 0) {
					t.Fatalf("after %d idle rounds, the oldest message is not found by its vector", rounds)
				}
			})
		}
	}
}

// A message larger than one round indexes (a pasted document) is indexed
// on, round after round: its last words are found in the end.
func TestBacklogIndexesTheRestOfAHugeMessage(t *testing.T) {
	t.Parallel() // each case on its own SQLite file or PostgreSQL database
	for name, opener := range backlogStores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := &roundCounter{backlogStore: opener(t)()}
			ix := NewIndexer(st, NewLocal(16), nil)
			id := memory.Identity{Tenant: "t", User: "u", Conversation: "c"}
			huge := randomWords(7, 900<<10) + " The last word is " + marker(1) + "."
			ex := memory.Exchange{ID: "e1", Identity: id, At: time.Now(),
				Turn:  []memory.Message{{Role: "user", Content: huge}},
				Reply: memory.Message{Role: "assistant", Content: "Read it. " + marker(2)}}
			st.begin()
			saveAndIndex(t, st, ix, ex)
			if foundWord(t, st, id, marker(1), memory.Key(ex.ID, 0)) || !foundWord(t, st, id, marker(2), memory.Key(ex.ID, 1)) {
				t.Fatal("the huge message's end is indexed at once, or the reply is not: the test proves nothing")
			}
			rounds := idleRounds(t, st, ix, 1000, backlogIndexUnits)
			if !foundWord(t, st, id, marker(1), memory.Key(ex.ID, 0)) {
				t.Fatalf("the huge message's last words are not found after %d idle rounds", rounds)
			}
		})
	}
}

// What waits to be indexed is of the conversation it was said in: a user
// erased, or a conversation deleted, between two rounds, or while a round
// runs (between its reads and its write), gets nothing more indexed, and
// nothing of theirs comes back; another user's history is indexed whole.
func TestBacklogIndexesNothingErasedOrDeleted(t *testing.T) {
	t.Parallel() // each case on its own SQLite file or PostgreSQL database
	// The indexer indexes an eighth of what an exchange has indexed at
	// once, and n is past that by about a dozen messages: what is asserted
	// holds at any scale, and at full scale (900 messages) erasing and
	// deleting the indexed histories from SQLite's full-text index (a
	// secure delete) took ten minutes under -race on a loaded 2-core
	// machine.
	const scale = 8
	const n = 900 / scale
	for name, opener := range backlogStores {
		for _, during := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/during=%v", name, during), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				st := &roundCounter{backlogStore: opener(t)()}
				ix := NewIndexer(st, NewLocal(16), nil)
				ix.indexUnits = exchangeIndexUnits / scale
				erased := memory.Identity{Tenant: "t", User: "erased", Conversation: "c"}
				deleted := memory.Identity{Tenant: "t", User: "kept", Conversation: "gone"}
				kept := memory.Identity{Tenant: "t", User: "kept", Conversation: "c"}
				exs := map[memory.Identity]memory.Exchange{}
				for i, id := range []memory.Identity{erased, deleted, kept} {
					exs[id] = resentHistory(id, fmt.Sprintf("e%d", i), n)
					saveAndIndex(t, st, ix, exs[id])
				}
				if found(t, st, kept, exs[kept].ID, 0) {
					t.Fatal("the oldest message is indexed at once: the history fits one round and the test proves nothing")
				}
				forget := func() {
					if err := st.DeleteUser(ctx, erased.Tenant, erased.User); err != nil {
						t.Error(err)
					}
					if err := st.DeleteConversation(ctx, deleted); err != nil {
						t.Error(err)
					}
				}
				if during {
					st.before = forget
				} else {
					forget()
				}
				st.mu.Lock()
				st.wrote = nil
				st.mu.Unlock()
				idleRounds(t, st, ix, 1000, ix.backlogUnits())
				if !during && (st.wrote[erased] > 0 || st.wrote[deleted] > 0) {
					t.Errorf("after the erasure and the deletion, the rounds wrote %d items of the erased user, %d of the deleted conversation",
						st.wrote[erased], st.wrote[deleted])
				}
				for _, id := range []memory.Identity{erased, deleted} {
					for i := 0; i < n; i += 53 {
						hits, err := st.SearchText(ctx, memory.ItemQuery{Tenant: id.Tenant, User: id.User, Text: marker(i), Limit: 5})
						if err != nil {
							t.Fatal(err)
						}
						for _, h := range hits {
							if h.Conversation == id.Conversation || id == erased {
								t.Fatalf("%s/%s: message %d found after it was forgotten", id.User, id.Conversation, i)
							}
						}
					}
				}
				if !found(t, st, kept, exs[kept].ID, 0) {
					t.Fatal("the kept conversation's oldest message is not indexed")
				}
			})
		}
	}
}
