package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/itemindex"
	"github.com/memgate/memgate/internal/memory"
)

// openTemp opens a Store on a fresh file, closed when the test ends.
func openTemp(t *testing.T, path string) *Store {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "memgate.db")
	}
	s, err := Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// checkRecent fails the test unless s.Recent(id, n) is what the SQL of
// Recent before the cache (liveTail) reads, field for field.
func checkRecent(t *testing.T, ctx context.Context, s *Store, id memory.Identity, n int, step string) {
	t.Helper()
	got, err := s.Recent(ctx, id, n)
	if err != nil {
		t.Fatalf("%s: Recent: %v", step, err)
	}
	want := []memory.Message{}
	if n > 0 {
		if want, err = liveTail(context.Background(), s.reads, id, n); err != nil {
			t.Fatalf("%s: liveTail: %v", step, err)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: Recent(%s/%s, %d) =\n%+v\nwant (SQL)\n%+v", step, id.User, id.Conversation, n, got, want)
	}
}

// TestRecentMatchesSQL runs random sequences of writes on one file, through
// the Store asked, another Store and plain SQL (saves, group commits,
// regenerations, edits, deletes, deleted conversations, erasures), and
// after each checks Recent, for random n, against the query it answered
// with before it kept the messages in memory.
func TestRecentMatchesSQL(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 15))
			path := filepath.Join(t.TempDir(), "memgate.db")
			s, other := openTemp(t, path), openTemp(t, path)
			db, err := sql.Open("sqlite", "file:"+path+"?_busy_timeout=10000")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			ctx := context.Background()
			ids := []memory.Identity{
				{Tenant: "acme", User: "alice", Conversation: "c1"},
				{Tenant: "acme", User: "alice", Conversation: "c2"},
				{Tenant: "acme", User: "bob", Conversation: "c1"},
				{Tenant: "other", User: "alice", Conversation: "c1"},
			}
			at := time.Now().Add(-time.Hour)
			exN := 0
			exchange := func(id memory.Identity) memory.Exchange {
				at = at.Add(time.Second)
				exN++
				ex := memory.Exchange{ID: fmt.Sprint("ex", exN), Identity: id, At: at, Model: "m",
					Reply: memory.Message{Role: "assistant", Content: fmt.Sprint("answer ", exN), Tokens: exN}}
				for i := range 1 + rng.IntN(3) {
					ex.Turn = append(ex.Turn, memory.Message{Role: "user", Content: fmt.Sprintf("question %d.%d", exN, i),
						Raw: []byte(fmt.Sprintf(`{"role":"user","content":"question %d.%d","name":"x"}`, exN, i))})
				}
				if rng.IntN(4) == 0 { // a resent history, diverging somewhere (a regeneration) or not
					live, err := liveTail(ctx, s.reads, id, 200)
					if err != nil {
						t.Fatal(err)
					}
					if len(live) > 0 {
						prior := live[:rng.IntN(len(live)+1)]
						for _, m := range prior {
							ex.Prior = append(ex.Prior, memory.Message{Role: m.Role, Content: m.Content, Raw: m.Raw})
						}
					}
				}
				return ex
			}
			for step := range 150 {
				id := ids[rng.IntN(len(ids))]
				var what string
				switch op := rng.IntN(20); {
				case op < 7:
					what = "save"
					if _, err := s.SaveExchange(ctx, exchange(id)); err != nil {
						t.Fatal(err)
					}
				case op < 10:
					what = "group commit"
					var exs []memory.Exchange
					for range 1 + rng.IntN(4) {
						exs = append(exs, exchange(ids[rng.IntN(len(ids))]))
					}
					if _, err := s.SaveExchanges(ctx, exs); err != nil {
						t.Fatal(err)
					}
				case op < 12:
					what = "the other store's save"
					if _, err := other.SaveExchange(ctx, exchange(id)); err != nil {
						t.Fatal(err)
					}
				case op < 14:
					what = "an edit in SQL"
					if _, err := db.ExecContext(ctx, `UPDATE messages SET content = content || ' edited'
						WHERE tenant = ? AND user_id = ? AND conversation = ? AND seq = (
							SELECT MAX(seq) FROM messages WHERE tenant = ? AND user_id = ? AND conversation = ?)`,
						id.Tenant, id.User, id.Conversation, id.Tenant, id.User, id.Conversation); err != nil {
						t.Fatal(err)
					}
				case op < 16:
					what = "a delete in SQL"
					if _, err := db.ExecContext(ctx, `DELETE FROM messages WHERE tenant = ? AND user_id = ? AND conversation = ?
						AND seq % 3 = ?`, id.Tenant, id.User, id.Conversation, rng.IntN(3)); err != nil {
						t.Fatal(err)
					}
				case op < 17:
					what = "a deleted conversation"
					if err := other.DeleteConversation(ctx, id); err != nil && !errors.Is(err, memory.ErrNotFound) {
						t.Fatal(err)
					}
				case op < 18:
					what = "an erasure"
					st := []*Store{s, other}[rng.IntN(2)]
					if err := st.DeleteUser(ctx, id.Tenant, id.User); err != nil {
						t.Fatal(err)
					}
					at = time.Now().Add(time.Duration(step+1) * time.Minute) // saves after it are kept
				default:
					what = "reads only"
				}
				if rng.IntN(3) == 0 {
					continue // no reads: what is held stays as of an older count
				}
				for _, id := range ids {
					rctx := ctx
					if rng.IntN(2) == 0 {
						rctx = memory.WithMemo(ctx)
					}
					for range 2 {
						checkRecent(t, rctx, s, id, []int{0, 1, 2, 5, 20, 63, 64, 65, 100}[rng.IntN(9)],
							fmt.Sprintf("step %d, after %s", step, what))
					}
				}
			}
		})
	}
}

// TestRecentHeldAfterTheCommitNotAppendedTwice holds a tail as a Recent
// racing a save would: the count read before the save's commit, the
// messages after it (so they already hold what the save stored). The
// save's write-through, applied next, must not append them again.
func TestRecentHeldAfterTheCommitNotAppendedTwice(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t, "")
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	exchange := func(exID string) memory.Exchange {
		return memory.Exchange{ID: exID, Identity: id, At: time.Now(),
			Turn:  []memory.Message{{Role: "user", Content: "q " + exID}},
			Reply: memory.Message{Role: "assistant", Content: "a " + exID}}
	}
	save := func(ex memory.Exchange) memory.SaveResult {
		res, err := s.SaveExchange(ctx, ex)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	save(exchange("ex1"))
	rev, err := cache.ReadRevisions(ctx, indexSource{s}, id.Tenant, id.User)
	if err != nil {
		t.Fatal(err)
	}
	before := rev.Tail()
	ex2 := exchange("ex2")
	res := save(ex2)
	msgs, err := liveTail(ctx, s.reads, id, tailKeep) // read after the commit
	if err != nil {
		t.Fatal(err)
	}
	s.tails.Put(revKey{id.Tenant, id.User, before, id.Conversation}, tail{msgs: msgs, all: true})
	s.advanceTails([]memory.Exchange{ex2}, []memory.SaveResult{res}, []int64{before})
	checkRecent(t, ctx, s, id, 10, "after the write-through")
}

// TestRecentConcurrentSaves asks for a conversation's newest messages
// while saves of it run, then checks the answer once they are done.
func TestRecentConcurrentSaves(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memgate.db")
	s, other := openTemp(t, path), openTemp(t, path)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := []*Store{s, s, other}[w]
			for i := range 30 {
				ex := memory.Exchange{ID: fmt.Sprintf("w%d-%d", w, i), Identity: id, At: time.Now(),
					Turn:  []memory.Message{{Role: "user", Content: fmt.Sprintf("q %d %d", w, i)}},
					Reply: memory.Message{Role: "assistant", Content: fmt.Sprintf("a %d %d", w, i)}}
				if _, err := st.SaveExchange(ctx, ex); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if _, err := s.Recent(memory.WithMemo(ctx), id, 10+r); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, n := range []int{1, 20, 64, 100, 200} {
		checkRecent(t, ctx, s, id, n, "after concurrent saves")
	}
}

// TestRecentUnderASmallBound: with memory.cache.recent_mb too small to keep
// any conversation's tail, Recent still answers what the SQL does, saves
// of several conversations and users keep it so, and the bound holds.
func TestRecentUnderASmallBound(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t, "")
	const bound = 2 << 10
	s.SetCacheLimits(itemindex.DefaultLimits, itemindex.DefaultWindowBytes, bound)
	for i := range 30 {
		id := memory.Identity{Tenant: "acme", User: fmt.Sprint("u", i%3), Conversation: fmt.Sprint("c", i%2)}
		ex := memory.Exchange{ID: fmt.Sprint("ex-", i), Identity: id, At: time.Now(),
			Turn:  []memory.Message{{Role: "user", Content: fmt.Sprintf("question %d %0200d", i, i)}},
			Reply: memory.Message{Role: "assistant", Content: fmt.Sprintf("answer %d %0200d", i, i)}}
		if _, err := s.SaveExchange(ctx, ex); err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, 5, 20} {
			checkRecent(t, memory.WithMemo(ctx), s, id, n, fmt.Sprint("after save ", i))
		}
		if _, bytes := s.tails.Usage(); bytes > bound {
			t.Fatalf("after save %d the tails hold %d bytes, past the %d bound", i, bytes, bound)
		}
	}
}
