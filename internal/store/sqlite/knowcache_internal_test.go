package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// checkFacts fails the test unless s.Facts(tenant, user, now, false) is
// what the SQL of Facts before the cache (facts) reads, field for field,
// and the answer is the caller's to change.
func checkFacts(t *testing.T, ctx context.Context, s *Store, tenant, user string, now time.Time, step string) {
	t.Helper()
	got, err := s.Facts(ctx, tenant, user, now, false)
	if err != nil {
		t.Fatalf("%s: Facts: %v", step, err)
	}
	want, err := s.facts(context.Background(), tenant, user, now, false)
	if err != nil {
		t.Fatalf("%s: facts (SQL): %v", step, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: Facts(%s/%s) =\n%+v\nwant (SQL)\n%+v", step, tenant, user, got, want)
	}
	if memory.MemoFrom(ctx) != nil {
		return // the request's answer is shared and must not be changed
	}
	for i := range got { // the caller's: changing it changes nothing held
		got[i].Value += " changed"
		if got[i].ExpiresAt != nil {
			*got[i].ExpiresAt = got[i].ExpiresAt.Add(time.Hour)
		}
	}
	if again, err := s.Facts(ctx, tenant, user, now, false); err != nil || !reflect.DeepEqual(again, want) {
		t.Fatalf("%s: Facts after changing an answer =\n%+v, %v\nwant (SQL)\n%+v", step, again, err, want)
	}
}

// checkSummary fails the test unless s.LatestSummary(id) is what the SQL
// of LatestSummary before the cache (latestSummary) reads, field for
// field, memory.ErrNotFound alike, and the answer is the caller's to
// change.
func checkSummary(t *testing.T, ctx context.Context, s *Store, id memory.Identity, step string) {
	t.Helper()
	got, err := s.LatestSummary(ctx, id)
	want, wantErr := s.latestSummary(context.Background(), id)
	if (err == nil) != (wantErr == nil) || errors.Is(err, memory.ErrNotFound) != errors.Is(wantErr, memory.ErrNotFound) ||
		(err != nil && err.Error() != wantErr.Error()) {
		t.Fatalf("%s: LatestSummary(%s/%s) error %v, want (SQL) %v", step, id.User, id.Conversation, err, wantErr)
	}
	if wantErr != nil && !errors.Is(wantErr, memory.ErrNotFound) {
		t.Fatalf("%s: latestSummary (SQL): %v", step, wantErr)
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
	if again, err := s.LatestSummary(ctx, id); err != nil || !reflect.DeepEqual(again, want) {
		t.Fatalf("%s: LatestSummary after changing an answer =\n%+v, %v\nwant (SQL)\n%+v", step, again, err, want)
	}
}

// knowledgeFixture is two Stores and plain SQL on one file.
type knowledgeFixture struct {
	t        *testing.T
	s, other *Store
	db       *sql.DB
	exN      int
}

func newKnowledgeFixture(t *testing.T) *knowledgeFixture {
	path := filepath.Join(t.TempDir(), "memgate.db")
	s, other := openTemp(t, path), openTemp(t, path)
	db, err := sql.Open("sqlite", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &knowledgeFixture{t: t, s: s, other: other, db: db}
}

// save stores an exchange in id's conversation (creating it) through st.
func (f *knowledgeFixture) save(st *Store, id memory.Identity) {
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
func (f *knowledgeFixture) summarise(st *Store, id memory.Identity, text string) {
	f.t.Helper()
	ctx := context.Background()
	v := 1
	if cur, err := f.s.latestSummary(ctx, id); err == nil {
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
func (f *knowledgeFixture) upsert(st *Store, tenant, user, key, value string, expires *time.Time, at time.Time) memory.Fact {
	f.t.Helper()
	out, err := st.UpsertFact(context.Background(), memory.Fact{Tenant: tenant, User: user, Type: memory.FactPreference,
		Key: key, Value: value, Confidence: 0.7, UpdatedAt: at, ExpiresAt: expires}, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	return out
}

// exec runs plain SQL on the file.
func (f *knowledgeFixture) exec(q string, args ...any) {
	f.t.Helper()
	if _, err := f.db.Exec(q, args...); err != nil {
		f.t.Fatalf("%s: %v", q, err)
	}
}

// TestFactsAndSummaryFollowEveryChange keeps asking one Store for a user's
// current facts and a conversation's latest summary while that Store,
// another Store on the same file and plain SQL change them, and time
// passes an expiry without any write; every answer, with and without a
// request's memory.Memo, is what the SQL reads.
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
		for _, ctx := range []context.Context{context.Background(), memory.WithMemo(context.Background())} {
			for _, id := range []memory.Identity{alice, bob} {
				checkFacts(t, ctx, s, id.Tenant, id.User, now, step)
			}
			for _, id := range []memory.Identity{alice, alice2, bob} {
				checkSummary(t, ctx, s, id, step)
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
		VALUES ('acme', 'alice', 'preference', 'pet', 'pet', 'cat', 0.5, 1, 1, ?, ?)`, nanos(base), nanos(base.Add(6*time.Minute)))
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
	before, err := indexSource{s}.ItemRevisions(context.Background(), "acme", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, held := s.factCache.Get(revKey{"acme", "alice", before.Facts, ""}); !held {
		t.Fatal("alice's facts are not held before her erasure")
	}
	if err := s.DeleteUser(context.Background(), "acme", "alice"); err != nil {
		t.Fatal(err)
	}
	// alice's erased facts and summaries are not kept in memory, not even
	// as of the counts before the erasure.
	if _, held := s.factCache.Get(revKey{"acme", "alice", before.Facts, ""}); held {
		t.Error("alice's facts are held after her erasure")
	}
	if _, held := s.summaryCache.Get(revKey{"acme", "alice", before.Summaries, alice2.Conversation}); held {
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
// through the Store asked, another Store and plain SQL (fact upserts,
// supersessions, evictions, deletes, edits, summary versions, deleted
// conversations, erasures), and after each checks Facts and LatestSummary,
// at random times, against the queries they answered with before they
// kept facts and summaries in memory.
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
			stores := []*Store{f.s, f.other}
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
						id.Tenant, id.User, rng.IntN(2) == 0, nanos(clock.Add(time.Duration(rng.IntN(10))*time.Second)),
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
				ctx := context.Background()
				if rng.IntN(2) == 0 {
					ctx = memory.WithMemo(ctx)
				}
				at := clock.Add(time.Duration(rng.IntN(20)-10) * time.Second)
				for _, o := range ids {
					name := fmt.Sprintf("step %d (%s)", step, what)
					checkFacts(t, ctx, f.s, o.Tenant, o.User, at, name)
					checkSummary(t, ctx, f.s, o, name)
				}
			}
		})
	}
}
