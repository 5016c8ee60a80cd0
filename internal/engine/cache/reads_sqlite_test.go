package cache_test

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
	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
)

// The tests below read a real SQLite store through Reads, as the gateway
// does, while it, another store on the same file and plain SQL write, and
// check every answer against the store's own SQL read.

// openSQLite opens a store on path (a fresh file when ""), closed when the
// test ends.
func openSQLite(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "memgate.db")
	}
	s, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// rawDB opens plain SQL on path, closed when the test ends.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// viaCache is a store read through Reads, each read a request of its own
// (the user's Revisions read first), its saves and erasures reaching the
// cache, as the gateway wires them.
type viaCache struct {
	*sqlite.Store
	r *cache.Reads // the store's reads, saves and erasures, as the gateway wires them
}

func newViaCache(s *sqlite.Store, tailBytes int) viaCache {
	return viaCache{Store: s, r: cache.NewReads(s, nil, tailBytes, cache.DefaultKnowledgeBytes)}
}

func (v viaCache) rev(ctx context.Context, tenant, user string) *memory.Revisions {
	r, err := v.ItemRevisions(ctx, tenant, user)
	if err != nil {
		return nil
	}
	return &r
}

func (v viaCache) recent(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error) {
	return v.r.Recent(ctx, v.rev(ctx, id.Tenant, id.User), id, n)
}

func (v viaCache) facts(ctx context.Context, tenant, user string, now time.Time) ([]memory.Fact, error) {
	return v.r.Facts(ctx, v.rev(ctx, tenant, user), tenant, user, now, false)
}

func (v viaCache) summary(ctx context.Context, id memory.Identity) (memory.Summary, error) {
	return v.r.LatestSummary(ctx, v.rev(ctx, id.Tenant, id.User), id)
}

func (v viaCache) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	return v.r.SaveExchange(ctx, ex)
}

func (v viaCache) SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error) {
	return v.r.SaveExchanges(ctx, exs)
}

func (v viaCache) DeleteUser(ctx context.Context, tenant, user string) error {
	return v.r.DeleteUser(ctx, tenant, user)
}

// checkRecent fails the test unless v's Recent(id, n) through the cache is
// what the store's SQL reads, field for field.
func checkRecent(t *testing.T, v viaCache, id memory.Identity, n int, step string) {
	t.Helper()
	ctx := context.Background()
	got, err := v.recent(ctx, id, n)
	if err != nil {
		t.Fatalf("%s: Recent: %v", step, err)
	}
	want, err := v.Store.Recent(ctx, id, n)
	if err != nil {
		t.Fatalf("%s: Recent (SQL): %v", step, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: Recent(%s/%s, %d) =\n%+v\nwant (SQL)\n%+v", step, id.User, id.Conversation, n, got, want)
	}
}

// checkFacts fails the test unless the user's current facts at now
// through the cache are what the store's SQL reads, field for field, and
// the answer is the caller's to change.
func checkFacts(t *testing.T, v viaCache, tenant, user string, now time.Time, step string) {
	t.Helper()
	ctx := context.Background()
	got, err := v.facts(ctx, tenant, user, now)
	if err != nil {
		t.Fatalf("%s: Facts: %v", step, err)
	}
	want, err := v.Store.Facts(ctx, tenant, user, now, false)
	if err != nil {
		t.Fatalf("%s: Facts (SQL): %v", step, err)
	}
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: Facts(%s/%s) =\n%+v\nwant (SQL)\n%+v", step, tenant, user, got, want)
	}
	for i := range got { // the caller's: changing it changes nothing held
		got[i].Value += " changed"
		if got[i].ExpiresAt != nil {
			*got[i].ExpiresAt = got[i].ExpiresAt.Add(time.Hour)
		}
	}
	if again, err := v.facts(ctx, tenant, user, now); err != nil || !reflect.DeepEqual(again, want) {
		t.Fatalf("%s: Facts after changing an answer =\n%+v, %v\nwant (SQL)\n%+v", step, again, err, want)
	}
}

// checkSummary fails the test unless id's latest summary through the
// cache is what the store's SQL reads, field for field, memory.ErrNotFound
// alike, and the answer is the caller's to change.
func checkSummary(t *testing.T, v viaCache, id memory.Identity, step string) {
	t.Helper()
	ctx := context.Background()
	got, err := v.summary(ctx, id)
	want, wantErr := v.Store.LatestSummary(ctx, id)
	if (err == nil) != (wantErr == nil) || errors.Is(err, memory.ErrNotFound) != errors.Is(wantErr, memory.ErrNotFound) {
		t.Fatalf("%s: LatestSummary(%s/%s) error %v, want (SQL) %v", step, id.User, id.Conversation, err, wantErr)
	}
	if wantErr != nil && !errors.Is(wantErr, memory.ErrNotFound) {
		t.Fatalf("%s: LatestSummary (SQL): %v", step, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: LatestSummary(%s/%s) =\n%+v\nwant (SQL)\n%+v", step, id.User, id.Conversation, got, want)
	}
	if err != nil {
		return
	}
	got.Text += " changed"
	for _, ss := range [][]string{got.KeyEvents, got.Preserved.Numbers, got.Preserved.Dates, got.Preserved.Decisions} {
		for i := range ss {
			ss[i] = "changed"
		}
	}
	if again, err := v.summary(ctx, id); err != nil || !reflect.DeepEqual(again, want) {
		t.Fatalf("%s: LatestSummary after changing an answer =\n%+v, %v\nwant (SQL)\n%+v", step, again, err, want)
	}
}

// writer is what the fixtures write through: the store read through the
// cache, or another one.
type writer interface {
	SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error)
	SaveSummary(ctx context.Context, sum memory.Summary) error
	LatestSummary(ctx context.Context, id memory.Identity) (memory.Summary, error)
	UpsertFact(ctx context.Context, f memory.Fact, maxPerUser int) (memory.Fact, error)
	DeleteFact(ctx context.Context, tenant, user string, id int64) error
	DeleteConversation(ctx context.Context, id memory.Identity) error
	DeleteUser(ctx context.Context, tenant, user string) error
}

// knowledgeFixture is a store read through the cache, another store and
// plain SQL on one file.
type knowledgeFixture struct {
	t     *testing.T
	s     viaCache
	other *sqlite.Store
	db    *sql.DB
	exN   int
}

func newKnowledgeFixture(t *testing.T) *knowledgeFixture {
	path := filepath.Join(t.TempDir(), "memgate.db")
	return &knowledgeFixture{t: t, s: newViaCache(openSQLite(t, path), cache.DefaultTailBytes), other: openSQLite(t, path), db: rawDB(t, path)}
}

// save stores an exchange in id's conversation (creating it) through st.
func (f *knowledgeFixture) save(st writer, id memory.Identity) {
	f.t.Helper()
	f.exN++
	ex := memory.Exchange{ID: fmt.Sprint("ex", f.exN), Identity: id, At: time.Now(), Model: "m",
		Turn:  []memory.Message{{Role: "user", Content: fmt.Sprint("question ", f.exN)}},
		Reply: memory.Message{Role: "assistant", Content: fmt.Sprint("answer ", f.exN)}}
	if _, err := st.SaveExchange(context.Background(), ex); err != nil {
		f.t.Fatal(err)
	}
}

// summarise stores the next summary version of id's conversation through st.
func (f *knowledgeFixture) summarise(st writer, id memory.Identity, text string) {
	f.t.Helper()
	ctx := context.Background()
	v := 1
	if cur, err := f.other.LatestSummary(ctx, id); err == nil {
		v = cur.Version + 1
	} else if !errors.Is(err, memory.ErrNotFound) {
		f.t.Fatal(err)
	}
	sum := memory.Summary{Tenant: id.Tenant, User: id.User, Conversation: id.Conversation, Version: v,
		FromSeq: 1, ToSeq: int64(v), Text: text, KeyEvents: []string{text + " happened"},
		Preserved: memory.Preserved{Numbers: []string{fmt.Sprint(v)}, Dates: nil, Decisions: []string{"go"}},
		Tokens:    10 * v, CoveredTokens: 100 * v, Summariser: "model", CreatedAt: time.Now()}
	if err := st.SaveSummary(ctx, sum); err != nil {
		f.t.Fatal(err)
	}
}

// upsert records a fact through st.
func (f *knowledgeFixture) upsert(st writer, tenant, user, key, value string, expires *time.Time, at time.Time) {
	f.t.Helper()
	if _, err := st.UpsertFact(context.Background(), memory.Fact{Tenant: tenant, User: user, Type: memory.FactPreference,
		Key: key, Value: value, Confidence: 0.7, UpdatedAt: at, ExpiresAt: expires}, 0); err != nil {
		f.t.Fatal(err)
	}
}

// exec runs plain SQL on the file.
func (f *knowledgeFixture) exec(q string, args ...any) {
	f.t.Helper()
	if _, err := f.db.Exec(q, args...); err != nil {
		f.t.Fatalf("%s: %v", q, err)
	}
}

// TestFactsAndSummaryFollowEveryChange keeps asking a store, through Reads, for a user's
// current facts and a conversation's latest summary while that Store,
// another Store on the same file and plain SQL change them, and time
// passes an expiry without any write; every answer is what the SQL reads.
func TestFactsAndSummaryFollowEveryChange(t *testing.T) {
	f := newKnowledgeFixture(t)
	s, other := f.s, f.other
	alice := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	alice2 := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c2"}
	bob := memory.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	now := base.Add(30 * time.Minute)
	check := func(step string) {
		t.Helper()
		for range 2 { // the second answers may come from memory
			for _, id := range []memory.Identity{alice, bob} {
				checkFacts(t, s, id.Tenant, id.User, now, step)
			}
			for _, id := range []memory.Identity{alice, alice2, bob} {
				checkSummary(t, s, id, step)
			}
		}
	}
	check("nothing stored")
	f.save(s, alice)
	f.save(s, alice2)
	f.save(other, bob)
	check("conversations, no summaries")
	f.upsert(s, "acme", "alice", "diet", "vegan", nil, base.Add(time.Minute))
	exp := now.Add(time.Second)
	f.upsert(s, "acme", "alice", "trip", "Lisbon", &exp, base.Add(2*time.Minute))
	f.upsert(other, "acme", "bob", "diet", "omnivore", nil, base.Add(3*time.Minute))
	check("facts stored")
	f.upsert(other, "acme", "alice", "diet", "vegetarian", nil, base.Add(4*time.Minute))
	check("the other store's supersession")
	f.upsert(s, "acme", "alice", "diet", "Vegetarian ", nil, base.Add(5*time.Minute))
	check("a restatement")
	now = now.Add(2 * time.Second) // the trip expires: same counts, no write
	check("an expiry passed")
	now = now.Add(-2 * time.Second)
	check("before the expiry again")
	f.exec(`UPDATE facts SET value = 'Porto' WHERE tenant = 'acme' AND user_id = 'alice' AND key = 'trip'`)
	check("an edit in SQL")
	f.exec(`INSERT INTO facts (tenant, user_id, type, key, norm_key, value, confidence, mentions, pinned, created_at, updated_at)
		VALUES ('acme', 'alice', 'preference', 'pet', 'pet', 'cat', 0.5, 1, 1, ?, ?)`, base.UnixNano(), base.Add(6*time.Minute).UnixNano())
	check("an insert in SQL")
	var id int64
	if err := f.db.QueryRow(`SELECT id FROM facts WHERE tenant = 'acme' AND user_id = 'alice' AND key = 'pet'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	if err := other.DeleteFact(context.Background(), "acme", "alice", id); err != nil {
		t.Fatal(err)
	}
	check("the other store's DeleteFact")
	f.exec(`DELETE FROM facts WHERE tenant = 'acme' AND user_id = 'bob'`)
	check("a delete in SQL")
	f.summarise(s, alice, "first")
	f.summarise(other, bob, "bob's")
	check("summaries")
	f.summarise(other, alice, "second")
	check("the other store's new version")
	f.summarise(s, alice, "third")
	check("a new version")
	f.exec(`UPDATE summaries SET content = 'edited' WHERE tenant = 'acme' AND user_id = 'alice' AND version = 3`)
	check("a summary edited in SQL")
	f.exec(`DELETE FROM summaries WHERE tenant = 'acme' AND user_id = 'alice' AND version = 3`)
	check("a summary deleted in SQL")
	if err := other.DeleteConversation(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	check("the other store's deleted conversation")
	f.save(s, alice)
	f.summarise(s, alice, "again")
	check("the conversation again")
	if err := s.DeleteConversation(context.Background(), alice); err != nil {
		t.Fatal(err)
	}
	check("a deleted conversation")
	f.summarise(s, alice2, "kept")
	check("a summary to erase")
	before, err := s.ItemRevisions(context.Background(), "acme", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if !cache.HoldsFacts(s.r, "acme", "alice", before.Facts) {
		t.Fatal("alice's facts are not held before her erasure")
	}
	if err := s.DeleteUser(context.Background(), "acme", "alice"); err != nil {
		t.Fatal(err)
	}
	// alice's erased facts and summaries are not kept in memory, not even
	// as of the counts before the erasure.
	if cache.HoldsFacts(s.r, "acme", "alice", before.Facts) {
		t.Error("alice's facts are held after her erasure")
	}
	if cache.HoldsSummary(s.r, alice2, before.Summaries) {
		t.Error("alice's summary is held after her erasure")
	}
	check("an erasure")
	if err := other.DeleteUser(context.Background(), "acme", "bob"); err != nil {
		t.Fatal(err)
	}
	check("the other store's erasure")
	time.Sleep(time.Millisecond) // captures after the erasures
	f.save(s, alice)
	f.save(other, bob)
	f.upsert(s, "acme", "alice", "diet", "vegan", nil, time.Now())
	f.upsert(other, "acme", "bob", "diet", "omnivore", nil, time.Now())
	f.summarise(s, alice, "first")
	f.summarise(other, bob, "bob's")
	now = time.Now().Add(time.Minute)
	check("refilled with the same keys")
}

// TestKnowledgeMatchesSQL runs random sequences of writes on one file,
// through the store read through Reads, another store and plain SQL (fact upserts,
// supersessions, evictions, deletes, edits, summary versions, deleted
// conversations, erasures), and after each checks Facts and LatestSummary,
// at random times, against the store's SQL.
func TestKnowledgeMatchesSQL(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 15))
			f := newKnowledgeFixture(t)
			ids := []memory.Identity{
				{Tenant: "acme", User: "alice", Conversation: "c1"},
				{Tenant: "acme", User: "alice", Conversation: "c2"},
				{Tenant: "acme", User: "bob", Conversation: "c1"},
				{Tenant: "other", User: "alice", Conversation: "c1"},
			}
			for _, id := range ids {
				f.save(f.s, id)
			}
			base := time.Now().Add(-time.Hour)
			clock := base
			stores := []writer{f.s, f.other}
			keys := []string{"diet", "city", "trip", "pet", "job"}
			for step := range 150 {
				id := ids[rng.IntN(len(ids))]
				st := stores[rng.IntN(2)]
				var what string
				clock = clock.Add(time.Duration(rng.IntN(3)) * time.Second)
				switch op := rng.IntN(20); {
				case op < 7:
					what = "upsert"
					var exp *time.Time
					if rng.IntN(3) == 0 {
						e := clock.Add(time.Duration(rng.IntN(20)-5) * time.Second)
						exp = &e
					}
					val := fmt.Sprint("v", rng.IntN(3))
					if _, err := st.UpsertFact(context.Background(), memory.Fact{Tenant: id.Tenant, User: id.User,
						Conversation: id.Conversation, Type: memory.FactPreference, Key: keys[rng.IntN(len(keys))],
						Value: val, Confidence: rng.Float64(), Pinned: rng.IntN(5) == 0, UpdatedAt: clock, ExpiresAt: exp},
						rng.IntN(4)); err != nil {
						t.Fatal(err)
					}
				case op < 9:
					what = "DeleteFact"
					var fid int64
					err := f.db.QueryRow(`SELECT id FROM facts WHERE tenant = ? AND user_id = ? ORDER BY random() LIMIT 1`,
						id.Tenant, id.User).Scan(&fid)
					if errors.Is(err, sql.ErrNoRows) {
						continue
					} else if err != nil {
						t.Fatal(err)
					}
					if err := st.DeleteFact(context.Background(), id.Tenant, id.User, fid); err != nil {
						t.Fatal(err)
					}
				case op < 11:
					what = "fact edited in SQL"
					f.exec(`UPDATE facts SET value = value || '!', expires_at = CASE WHEN ?3 THEN ?4 ELSE expires_at END,
						updated_at = updated_at + ?5
						WHERE id = (SELECT id FROM facts WHERE tenant = ?1 AND user_id = ?2 ORDER BY random() LIMIT 1)`,
						id.Tenant, id.User, rng.IntN(2) == 0, clock.Add(time.Duration(rng.IntN(10))*time.Second).UnixNano(),
						rng.Int64N(3e9))
				case op < 12:
					what = "fact deleted in SQL"
					f.exec(`DELETE FROM facts WHERE id = (SELECT id FROM facts WHERE tenant = ? AND user_id = ?
						ORDER BY random() LIMIT 1)`, id.Tenant, id.User)
				case op < 16:
					what = "summary"
					f.summarise(st, id, fmt.Sprint("summary ", step))
				case op < 17:
					what = "summary deleted in SQL"
					f.exec(`DELETE FROM summaries WHERE tenant = ? AND user_id = ? AND conversation = ?
						AND version = (SELECT MAX(version) FROM summaries WHERE tenant = ?1 AND user_id = ?2 AND conversation = ?3)`,
						id.Tenant, id.User, id.Conversation)
				case op < 18:
					what = "deleted conversation"
					if err := st.DeleteConversation(context.Background(), id); err != nil && !errors.Is(err, memory.ErrNotFound) {
						t.Fatal(err)
					}
					f.save(stores[rng.IntN(2)], id)
				default:
					what = "erasure"
					if err := st.DeleteUser(context.Background(), id.Tenant, id.User); err != nil {
						t.Fatal(err)
					}
					time.Sleep(time.Millisecond)
					for _, o := range ids {
						if o.Tenant == id.Tenant && o.User == id.User {
							f.save(stores[rng.IntN(2)], o)
						}
					}
				}
				at := clock.Add(time.Duration(rng.IntN(20)-10) * time.Second)
				for _, o := range ids {
					name := fmt.Sprintf("step %d (%s)", step, what)
					checkFacts(t, f.s, o.Tenant, o.User, at, name)
					checkSummary(t, f.s, o, name)
				}
			}
		})
	}
}

// TestRecentMatchesSQL runs random sequences of writes on one file, through
// the store read through Reads, another store and plain SQL (saves, group commits,
// regenerations, edits, deletes, deleted conversations, erasures), and
// after each checks Recent, for random n, against the store's SQL.
func TestRecentMatchesSQL(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 15))
			path := filepath.Join(t.TempDir(), "memgate.db")
			s, other := newViaCache(openSQLite(t, path), cache.DefaultTailBytes), openSQLite(t, path)
			db := rawDB(t, path)
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
					live, err := s.Store.Recent(ctx, id, 200)
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
					st := []writer{s, other}[rng.IntN(2)]
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
					for range 2 {
						checkRecent(t, s, id, []int{0, 1, 2, 5, 20, 63, 64, 65, 100}[rng.IntN(9)],
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
	s := newViaCache(openSQLite(t, ""), cache.DefaultTailBytes)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	exchange := func(exID string) memory.Exchange {
		return memory.Exchange{ID: exID, Identity: id, At: time.Now(),
			Turn:  []memory.Message{{Role: "user", Content: "q " + exID}},
			Reply: memory.Message{Role: "assistant", Content: "a " + exID}}
	}
	if _, err := s.Store.SaveExchange(ctx, exchange("ex1")); err != nil {
		t.Fatal(err)
	}
	rev, err := s.ItemRevisions(ctx, id.Tenant, id.User)
	if err != nil {
		t.Fatal(err)
	}
	ex2 := exchange("ex2")
	res, err := s.Store.SaveExchange(ctx, ex2)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TailKnown || res.TailBefore != rev.Tail() {
		t.Fatalf("the save reports the count before it as %d (known %v), want %d", res.TailBefore, res.TailKnown, rev.Tail())
	}
	msgs, err := s.Store.Recent(ctx, id, 64) // read after the commit
	if err != nil {
		t.Fatal(err)
	}
	cache.HoldTail(s.r, id, rev.Tail(), msgs, true)
	s.r.Saved(ex2, res)
	checkRecent(t, s, id, 10, "after the write-through")
}

// TestRecentConcurrentSaves asks for a conversation's newest messages
// while saves of it run, then checks the answer once they are done.
func TestRecentConcurrentSaves(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memgate.db")
	s, other := newViaCache(openSQLite(t, path), cache.DefaultTailBytes), openSQLite(t, path)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := []writer{s, s, other}[w]
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
				if _, err := s.recent(ctx, id, 10+r); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, n := range []int{1, 20, 64, 100, 200} {
		checkRecent(t, s, id, n, "after concurrent saves")
	}
}

// TestRecentUnderASmallBound: with memory.cache.recent_mb too small to keep
// any conversation's tail, Recent still answers what the SQL does, saves
// of several conversations and users keep it so, and the bound holds.
func TestRecentUnderASmallBound(t *testing.T) {
	ctx := context.Background()
	const bound = 2 << 10
	s := newViaCache(openSQLite(t, ""), bound)
	for i := range 30 {
		id := memory.Identity{Tenant: "acme", User: fmt.Sprint("u", i%3), Conversation: fmt.Sprint("c", i%2)}
		ex := memory.Exchange{ID: fmt.Sprint("ex-", i), Identity: id, At: time.Now(),
			Turn:  []memory.Message{{Role: "user", Content: fmt.Sprintf("question %d %0200d", i, i)}},
			Reply: memory.Message{Role: "assistant", Content: fmt.Sprintf("answer %d %0200d", i, i)}}
		if _, err := s.SaveExchange(ctx, ex); err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{1, 5, 20} {
			checkRecent(t, s, id, n, fmt.Sprint("after save ", i))
		}
		if bytes := cache.TailBytes(s.r); bytes > bound {
			t.Fatalf("after save %d the tails hold %d bytes, past the %d bound", i, bytes, bound)
		}
	}
}

// TestErasureForgetsTheUsersEmbeddings: the embedding cache's keys name
// their owner (recall.EmbeddingKey), so an erasure through the Reads drops
// the erased user's vectors, whether or not the store's delete succeeded,
// and keeps everyone else's: a tenant erasing its users (or users it never
// had) does not empty the other tenants' vectors.
func TestErasureForgetsTheUsersEmbeddings(t *testing.T) {
	st := openSQLite(t, "")
	e := recall.NewEmbeddingCache(1 << 20)
	w := cache.NewReads(st, e, cache.DefaultTailBytes, cache.DefaultKnowledgeBytes)
	key := func(tenant, user string) recall.EmbeddingKey {
		return recall.EmbeddingKey{Model: "m", Dims: 2, Tenant: tenant, User: user, Hash: "h"}
	}
	for _, k := range []recall.EmbeddingKey{key("acme", "alice"), key("acme", "bob"), key("other", "alice")} {
		e.Put(k, []float32{1, 2})
	}
	if err := w.DeleteUser(context.Background(), "acme", "alice"); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.Get(key("acme", "alice")); ok {
		t.Error("after her erasure, acme/alice's vector is still in memory")
	}
	for _, k := range []recall.EmbeddingKey{key("acme", "bob"), key("other", "alice")} {
		if _, ok := e.Get(k); !ok {
			t.Errorf("the erasure of acme/alice dropped %s/%s's vector", k.Tenant, k.User)
		}
	}
}
