package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
)

// mustBigUser stores n messages of id's user (n/2 exchanges), each of
// words distinct random words and each a recall item, a fact and a
// summary, and returns a word of the user's first message.
func mustBigUser(tb testing.TB, s *sqlite.Store, id memory.Identity, n, words int) string {
	tb.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	text := func() string {
		ws := make([]string, words)
		for i := range ws {
			b := make([]byte, 8)
			for j := range b {
				b[j] = byte('a' + rng.IntN(26))
			}
			ws[i] = string(b)
		}
		return strings.Join(ws, " ")
	}
	at := time.Now().Add(-time.Hour)
	var exs []memory.Exchange
	var items []memory.Item
	for i := range n / 2 {
		ex := memory.Exchange{ID: fmt.Sprintf("big-%d", i), Identity: id, At: at.Add(time.Duration(i) * time.Millisecond),
			Turn: []memory.Message{{Role: "user", Content: text()}}, Reply: memory.Message{Role: "assistant", Content: text()}}
		exs = append(exs, ex)
		for j, m := range append(ex.Turn, ex.Reply) {
			items = append(items, memory.Item{Tenant: id.Tenant, User: id.User, Conversation: id.Conversation,
				Kind: "message", Ref: memory.Key(ex.ID, j), Text: m.Content})
		}
	}
	for len(exs) > 0 {
		k := min(len(exs), 256)
		if _, err := s.SaveExchanges(ctx, exs[:k]); err != nil {
			tb.Fatalf("SaveExchanges: %v", err)
		}
		exs = exs[k:]
	}
	if err := s.AddItems(ctx, items); err != nil {
		tb.Fatalf("AddItems: %v", err)
	}
	if _, err := s.UpsertFact(ctx, memory.Fact{Tenant: id.Tenant, User: id.User, Type: memory.FactProfile,
		Key: "city", Value: "Porto", Confidence: 0.9}, 0); err != nil {
		tb.Fatalf("UpsertFact: %v", err)
	}
	if err := s.SaveSummary(ctx, memory.Summary{Tenant: id.Tenant, User: id.User, Conversation: id.Conversation,
		Version: 1, FromSeq: 1, ToSeq: 2, Text: "The user lives in Porto"}); err != nil {
		tb.Fatalf("SaveSummary: %v", err)
	}
	if err := s.DeadLetter(ctx, memory.DeadLetter{Exchange: "dead", Identity: id, Reason: "test",
		Payload: []byte(`{"text":"set aside"}`), At: at}); err != nil {
		tb.Fatalf("DeadLetter: %v", err)
	}
	return strings.Fields(items[0].Text)[0]
}

// userRows counts the user's rows left in the tables an erasure deletes,
// read on db.
func userRows(tb testing.TB, db *sql.DB, tenant, user string) int {
	tb.Helper()
	var n int
	if err := db.QueryRow(`SELECT (SELECT COUNT(*) FROM memory_items WHERE tenant = ?1 AND user_id = ?2)
		+ (SELECT COUNT(*) FROM messages WHERE tenant = ?1 AND user_id = ?2)
		+ (SELECT COUNT(*) FROM facts WHERE tenant = ?1 AND user_id = ?2)
		+ (SELECT COUNT(*) FROM summaries WHERE tenant = ?1 AND user_id = ?2)
		+ (SELECT COUNT(*) FROM conversations WHERE tenant = ?1 AND user_id = ?2)
		+ (SELECT COUNT(*) FROM dead_letters WHERE tenant = ?1 AND user_id = ?2)`, tenant, user).Scan(&n); err != nil {
		tb.Fatalf("count rows: %v", err)
	}
	return n
}

// readsNothing returns what the store's reads still answer about id's
// user (none: "").
func readsNothing(ctx context.Context, s *sqlite.Store, id memory.Identity, word string) string {
	var found []string
	if cs, err := s.Conversations(ctx, id.Tenant, id.User); err != nil || len(cs) > 0 {
		found = append(found, fmt.Sprintf("Conversations: %d, %v", len(cs), err))
	}
	if _, msgs, err := s.Conversation(ctx, id); !errors.Is(err, memory.ErrNotFound) {
		found = append(found, fmt.Sprintf("Conversation: %d messages, %v", len(msgs), err))
	}
	if msgs, err := s.Recent(ctx, id, 10); err != nil || len(msgs) > 0 {
		found = append(found, fmt.Sprintf("Recent: %d, %v", len(msgs), err))
	}
	if fs, err := s.Facts(ctx, id.Tenant, id.User, time.Now(), true); err != nil || len(fs) > 0 {
		found = append(found, fmt.Sprintf("Facts: %d, %v", len(fs), err))
	}
	if _, err := s.LatestSummary(ctx, id); !errors.Is(err, memory.ErrNotFound) {
		found = append(found, fmt.Sprintf("LatestSummary: %v", err))
	}
	if items, err := s.SearchText(ctx, memory.ItemQuery{Tenant: id.Tenant, User: id.User, Text: word, Limit: 5}); err != nil || len(items) > 0 {
		found = append(found, fmt.Sprintf("SearchText: %d, %v", len(items), err))
	}
	if f, err := s.Footprint(ctx, id.Tenant, id.User); err != nil || f != (memory.Footprint{}) {
		found = append(found, fmt.Sprintf("Footprint: %+v, %v", f, err))
	}
	if ds, err := s.DeadLetters(ctx, id.Tenant); err != nil || len(ds) > 0 {
		found = append(found, fmt.Sprintf("DeadLetters: %d, %v", len(ds), err))
	}
	if us, err := s.Users(ctx, id.Tenant, "", 0); err != nil || len(us) > 0 {
		found = append(found, fmt.Sprintf("Users: %d, %v", len(us), err))
	}
	return strings.Join(found, "; ")
}

// TestDeleteUserYieldsTheWriterBetweenChunks erases a user of many
// messages while another tenant keeps capturing: captures commit while
// the user's rows are half deleted (the erasure is not one transaction
// holding the writer), and the user reads as empty whenever they do.
func TestDeleteUserYieldsTheWriterBetweenChunks(t *testing.T) {
	ctx := context.Background()
	s, path := mustTempStore(t)
	db := mustRawDB(t, path)
	victim := memory.Identity{Tenant: "tenant-a", User: "alice", Conversation: "c1"}
	other := memory.Identity{Tenant: "tenant-b", User: "bob", Conversation: "c1"}
	word := mustBigUser(t, s, victim, 160, 12)
	total := userRows(t, db, victim.Tenant, victim.User)

	done := make(chan struct{})
	type seen struct {
		captures, midway int
		visible          string
	}
	result := make(chan seen, 1)
	go func() {
		var r seen
		defer func() { result <- r }()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			ex := memory.Exchange{ID: fmt.Sprintf("other-%d", i), Identity: other, At: time.Now(),
				Turn: []memory.Message{{Role: "user", Content: "hello"}}, Reply: memory.Message{Role: "assistant", Content: "hi"}}
			if _, err := s.SaveExchange(ctx, ex); err != nil {
				r.visible = "other tenant's capture: " + err.Error()
				return
			}
			r.captures++
			if n := userRows(t, db, victim.Tenant, victim.User); n > 0 && n < total {
				r.midway++
				if v := readsNothing(ctx, s, victim, word); v != "" && r.visible == "" {
					r.visible = v
				}
			}
		}
	}()
	err := s.DeleteUser(ctx, victim.Tenant, victim.User)
	close(done)
	r := <-result
	if err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	if r.visible != "" {
		t.Fatalf("while the erasure ran, the erased user was readable: %s", r.visible)
	}
	if r.midway == 0 {
		t.Fatalf("no capture of another tenant committed while the erasure was half done (%d captures, %d rows): the erasure held the writer throughout",
			r.captures, total)
	}
	t.Logf("%d captures of another tenant committed while the erasure was under way (of %d)", r.midway, r.captures)
	if n := userRows(t, db, victim.Tenant, victim.User); n != 0 {
		t.Fatalf("%d rows of the erased user left", n)
	}
	if v := readsNothing(ctx, s, victim, word); v != "" {
		t.Fatalf("after the erasure: %s", v)
	}
	if cs, err := s.Conversations(ctx, other.Tenant, other.User); err != nil || len(cs) != 1 || cs[0].MessageCount != 2*r.captures {
		t.Fatalf("other tenant's conversations = %+v, %v; want one of %d messages", cs, err, 2*r.captures)
	}
}

// TestDeleteUserResumesAfterAStop stops an erasure after its second chunk,
// as a process stopping would: the user reads as empty and late captures
// are refused meanwhile, and the store that opens the database next
// deletes the rest.
func TestDeleteUserResumesAfterAStop(t *testing.T) {
	ctx := context.Background()
	s, path := mustTempStore(t)
	db := mustRawDB(t, path)
	victim := memory.Identity{Tenant: "tenant-a", User: "alice", Conversation: "c1"}
	word := mustBigUser(t, s, victim, 80, 12)
	total := userRows(t, db, victim.Tenant, victim.User)

	stopped := errors.New("stopped")
	sqlite.SetEraseChunks(s, func(chunk int) error {
		if chunk >= 2 {
			return stopped
		}
		return nil
	})
	if err := s.DeleteUser(ctx, victim.Tenant, victim.User); !errors.Is(err, stopped) {
		t.Fatalf("DeleteUser = %v, want it stopped", err)
	}
	if n := userRows(t, db, victim.Tenant, victim.User); n == 0 || n >= total {
		t.Fatalf("%d of %d rows left after two chunks: the test cannot see what it checks", n, total)
	}
	if v := readsNothing(ctx, s, victim, word); v != "" {
		t.Fatalf("with the erasure stopped mid-way: %s", v)
	}
	late := memory.Exchange{ID: "late", Identity: victim, At: time.Now().Add(-time.Minute),
		Turn: []memory.Message{{Role: "user", Content: "late turn"}}, Reply: memory.Message{Role: "assistant", Content: "ok"}}
	if res, err := s.SaveExchange(ctx, late); err != nil || !res.Dropped {
		t.Fatalf("a capture dated before the erasure, while it was under way: %+v, %v; want it dropped", res, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := mustOpen(t, path)
	deadline := time.Now().Add(2 * time.Minute)
	for userRows(t, db, victim.Tenant, victim.User) > 0 || pendingErasures(t, db) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("reopened store left %d rows, %d erasures under way", userRows(t, db, victim.Tenant, victim.User), pendingErasures(t, db))
		}
		if v := readsNothing(ctx, s2, victim, word); v != "" {
			t.Fatalf("while the reopened store finished the erasure: %s", v)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if v := readsNothing(ctx, s2, victim, word); v != "" {
		t.Fatalf("after the erasure finished: %s", v)
	}
	if at, err := s2.ErasedAt(ctx, victim.Tenant, victim.User); err != nil || at.IsZero() {
		t.Fatalf("ErasedAt = %v, %v", at, err)
	}
	// The user starts afresh once the erasure is over.
	fresh := memory.Exchange{ID: "fresh", Identity: victim, At: time.Now(),
		Turn: []memory.Message{{Role: "user", Content: "new start"}}, Reply: memory.Message{Role: "assistant", Content: "ok"}}
	if _, err := s2.SaveExchange(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if cs, err := s2.Conversations(ctx, victim.Tenant, victim.User); err != nil || len(cs) != 1 {
		t.Fatalf("after a fresh start: %+v, %v", cs, err)
	}
}

// pendingErasures counts the erasures under way.
func pendingErasures(tb testing.TB, db *sql.DB) int {
	tb.Helper()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM user_erasures`).Scan(&n); err != nil {
		tb.Fatalf("count erasures: %v", err)
	}
	return n
}

// BenchmarkDeleteUserLongestWait erases a user of 2,000 messages of
// distinct words while another tenant captures in a loop, and reports the
// longest a capture waited (the longest the erasure held the writer, at
// most one chunk) and the erasure's own time.
func BenchmarkDeleteUserLongestWait(b *testing.B) {
	ctx := context.Background()
	for i := range b.N {
		b.StopTimer()
		s, _ := mustTempStore(b)
		victim := memory.Identity{Tenant: "tenant-a", User: fmt.Sprintf("alice-%d", i), Conversation: "c1"}
		other := memory.Identity{Tenant: "tenant-b", User: "bob", Conversation: "c1"}
		mustBigUser(b, s, victim, 2000, 40)
		b.StartTimer()
		done, longest := make(chan struct{}), make(chan time.Duration, 1)
		go func() {
			var worst time.Duration
			defer func() { longest <- worst }()
			for j := 0; ; j++ {
				select {
				case <-done:
					return
				default:
				}
				start := time.Now()
				if _, err := s.SaveExchange(ctx, memory.Exchange{ID: fmt.Sprintf("o-%d-%d", i, j), Identity: other, At: time.Now(),
					Turn: []memory.Message{{Role: "user", Content: "hello"}}, Reply: memory.Message{Role: "assistant", Content: "hi"}}); err != nil {
					b.Error(err)
					return
				}
				worst = max(worst, time.Since(start))
			}
		}()
		start := time.Now()
		if err := s.DeleteUser(ctx, victim.Tenant, victim.User); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		close(done)
		worst := <-longest
		b.ReportMetric(float64(worst.Microseconds())/1000, "ms-longest-capture-wait")
		b.ReportMetric(float64(took.Microseconds())/1000, "ms-erasure")
		b.Logf("erasure of 2,000 messages: %s; longest capture wait meanwhile: %s", took, worst)
	}
}
