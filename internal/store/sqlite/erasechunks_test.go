package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/store/storetest"
)

// userRows counts the user's rows left in the tables an erasure deletes,
// read on db; -1, the test failed, when it cannot (it may run off the
// test's goroutine).
func userRows(tb testing.TB, db *sql.DB, tenant, user string) int {
	tb.Helper()
	var n int
	if err := db.QueryRow(`SELECT (SELECT COUNT(*) FROM memory_items WHERE tenant = ?1 AND user_id = ?2)
		+ (SELECT COUNT(*) FROM messages WHERE tenant = ?1 AND user_id = ?2)
		+ (SELECT COUNT(*) FROM facts WHERE tenant = ?1 AND user_id = ?2)
		+ (SELECT COUNT(*) FROM summaries WHERE tenant = ?1 AND user_id = ?2)
		+ (SELECT COUNT(*) FROM conversations WHERE tenant = ?1 AND user_id = ?2)
		+ (SELECT COUNT(*) FROM dead_letters WHERE tenant = ?1 AND user_id = ?2)`, tenant, user).Scan(&n); err != nil {
		tb.Errorf("count rows: %v", err)
		return -1
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
	word := storetest.SeedBigUser(t, s, victim, 160, 12)
	total := userRows(t, db, victim.Tenant, victim.User)

	done := make(chan struct{})
	type seen struct {
		captures, midway int
		visible          string
	}
	result := make(chan seen, 1)
	go func() {
		var r seen
		if err := storetest.CaptureWhile(ctx, s, other, done, func(n int, _ time.Duration) bool {
			r.captures = n
			if rows := userRows(t, db, victim.Tenant, victim.User); rows > 0 && rows < total {
				r.midway++
				if v := readsNothing(ctx, s, victim, word); v != "" && r.visible == "" {
					r.visible = v
				}
			}
			return true
		}); err != nil {
			r.visible = "other tenant's capture: " + err.Error()
		}
		result <- r
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
	word := storetest.SeedBigUser(t, s, victim, 80, 12)
	total := userRows(t, db, victim.Tenant, victim.User)

	stopped := errors.New("stopped")
	sqlite.StopResuming(s) // the erasure stays stopped until s2 opens
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

// BenchmarkDeleteUserLongestWait: storetest.BenchEraseWhileCapturing.
func BenchmarkDeleteUserLongestWait(b *testing.B) {
	storetest.BenchEraseWhileCapturing(b, func(b *testing.B) storetest.EraseBenchStore {
		s, _ := mustTempStore(b)
		return s
	})
}

// TestDeleteUserKeepsATurnReceivedDuringIt saves, between two chunks of an
// erasure, a turn the user sent after the erasure began: it is not one
// the erasure covers, so it is either stored for good or refused for a
// retry (memory.ErrUnavailable) — never stored, then deleted by the
// erasure's next chunk.
func TestDeleteUserKeepsATurnReceivedDuringIt(t *testing.T) {
	ctx := context.Background()
	s, victim := seedVictim(t, "c1")
	sqlite.StopResuming(s) // the hook is for this DeleteUser's chunks alone

	fresh := memory.Exchange{ID: "fresh", Identity: memory.Identity{Tenant: victim.Tenant, User: victim.User, Conversation: "c2"},
		Turn: []memory.Message{{Role: "user", Content: "sent after the erasure began"}}, Reply: memory.Message{Role: "assistant", Content: "ok"}}
	var saveErr error
	sqlite.SetEraseChunks(s, func(chunk int) error {
		if chunk == 1 {
			fresh.At = time.Now()
			_, saveErr = s.SaveExchange(ctx, fresh)
		}
		return nil
	})
	if err := s.DeleteUser(ctx, victim.Tenant, victim.User); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	if saveErr != nil {
		if !errors.Is(saveErr, memory.ErrUnavailable) {
			t.Fatalf("a turn received during the erasure: %v; want it stored or refused for a retry", saveErr)
		}
		if res, err := s.SaveExchange(ctx, fresh); err != nil || res.Dropped {
			t.Fatalf("its retry once the erasure is over: %+v, %v", res, err)
		}
	}
	if _, msgs, err := s.Conversation(ctx, fresh.Identity); err != nil || len(msgs) != 2 {
		t.Fatalf("the turn received during the erasure (saved with %v): %d messages, %v; want it kept", saveErr, len(msgs), err)
	}
}

// TestDeleteUserUnbindsProviderStatesAtOnce stops an erasure mid-way: the
// provider states bound to the user, deleted by its last chunk, are
// already no one's (as the user's other rows read as none).
func TestDeleteUserUnbindsProviderStatesAtOnce(t *testing.T) {
	ctx := context.Background()
	s, victim := seedVictim(t, "c1")
	st := []memory.ProviderState{{Kind: memory.StateResponse, ID: "resp_1"}}
	if err := s.BindState(ctx, memory.StateBinding{Tenant: victim.Tenant, User: victim.User, States: st,
		At: time.Now(), Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	stopErasure(t, s, victim)
	if bound, err := s.BoundStates(ctx, victim.Tenant, victim.User, st, time.Now()); err != nil || len(bound) != 1 || bound[0] {
		t.Fatalf("with the erasure under way, BoundStates = %v, %v; want the state no one's", bound, err)
	}
}

// TestDeleteUserHidesTextFromEmbedding stops an erasure mid-way: the
// user's items and backlogged messages still stored are not read out to
// be embedded (their text would go to the embedding provider after the
// user was erased).
func TestDeleteUserHidesTextFromEmbedding(t *testing.T) {
	ctx := context.Background()
	s, victim := seedVictim(t, "c1")
	if err := s.DeferIndex(ctx, []memory.PendingIndex{{Identity: victim, Key: memory.Key("big-19", 0), Bytes: 10}}); err != nil {
		t.Fatal(err)
	}
	if p, err := s.PendingIndex(ctx, 10, 1<<20); err != nil || len(p) != 1 || p[0].Gone || p[0].Message.Content == "" {
		t.Fatalf("before the erasure, PendingIndex = %+v, %v; the test cannot see what it checks", p, err)
	}
	stopErasure(t, s, victim)
	if items, err := s.ItemsToEmbed(ctx, "another-model", 3, 0, 1000); err != nil || len(items) > 0 {
		t.Fatalf("with the erasure under way, ItemsToEmbed = %d items, %v; want none of the erased user's", len(items), err)
	}
	pending, err := s.PendingIndex(ctx, 10, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pending {
		if !p.Gone || p.Message.Content != "" {
			t.Fatalf("with the erasure under way, PendingIndex reads %+v; want the erased user's message gone", p)
		}
	}
}

// TestDeleteUserContinuedNothing stops an erasure mid-way: a first turn
// the user sends again finds no conversation of theirs that stored it
// (Continued), though the rows are not all deleted yet: it is stored
// anew once the erasure is over, not dropped as stored already.
func TestDeleteUserContinuedNothing(t *testing.T) {
	ctx := context.Background()
	s, victim := seedVictim(t, "chat-x")
	// A conversation whose first messages are the turn, and the turn
	// sent again as the first of a chat (its candidate that conversation).
	ex := memory.Exchange{ID: "first", Identity: memory.Identity{Tenant: victim.Tenant, User: victim.User, Conversation: "chat-y"},
		At: time.Now(), Turn: []memory.Message{{Role: "user", Content: "hi"}}, Reply: memory.Message{Role: "assistant", Content: "hello"}}
	again := ex
	again.ID, again.Conversation, again.Candidate = "again", memory.DefaultConversation, "chat-y"
	if _, err := s.SaveExchange(ctx, ex); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Continued(ctx, again); err != nil || !ok {
		t.Fatalf("before the erasure, Continued = %v, %v; the test cannot see what it checks", ok, err)
	}
	stopErasure(t, s, victim)
	if ok, err := s.Continued(ctx, again); err != nil || ok {
		t.Fatalf("with the erasure under way, Continued = %v, %v; want false", ok, err)
	}
}

// stopErasure starts an erasure of victim's user on s and stops it after
// its first chunk, as a process stopping would: the erasure stays under
// way, most of the user's rows not deleted yet.
func stopErasure(t *testing.T, s *sqlite.Store, victim memory.Identity) {
	t.Helper()
	stopped := errors.New("stopped")
	sqlite.StopResuming(s) // the erasure stays stopped: no background round goes on with it
	sqlite.SetEraseChunks(s, func(int) error { return stopped })
	if err := s.DeleteUser(context.Background(), victim.Tenant, victim.User); !errors.Is(err, stopped) {
		t.Fatalf("DeleteUser = %v, want it stopped", err)
	}
}

// seedVictim returns a fresh store holding a user of a few dozen
// messages, items, a fact and a summary in conversation conv, and that
// conversation.
func seedVictim(t *testing.T, conv string) (*sqlite.Store, memory.Identity) {
	t.Helper()
	s, _ := mustTempStore(t)
	victim := memory.Identity{Tenant: "tenant-a", User: "alice", Conversation: conv}
	storetest.SeedBigUser(t, s, victim, 40, 12)
	return s, victim
}

// TestDeleteUserRetriesAFailedBackgroundRound: an erasure whose call
// failed part-way, and whose first background round failed too, is
// finished by a later round of the same store without another erasure or
// a restart to wake it: the user's new turns wait for it to end.
func TestDeleteUserRetriesAFailedBackgroundRound(t *testing.T) {
	ctx := context.Background()
	s, path := mustTempStore(t)
	db := mustRawDB(t, path)
	victim := memory.Identity{Tenant: "tenant-a", User: "alice", Conversation: "c1"}
	storetest.SeedBigUser(t, s, victim, 40, 12)

	failed := errors.New("failed")
	var calls atomic.Int32
	sqlite.SetEraseChunks(s, func(int) error {
		// The call's second chunk, then the background's first, fail.
		if n := calls.Add(1); n == 2 || n == 3 {
			return failed
		}
		return nil
	})
	if err := s.DeleteUser(ctx, victim.Tenant, victim.User); !errors.Is(err, failed) {
		t.Fatalf("DeleteUser = %v, want it failed", err)
	}
	deadline := time.Now().Add(time.Minute)
	for userRows(t, db, victim.Tenant, victim.User) > 0 || pendingErasures(t, db) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d rows and %d erasures under way left: a failed background round was not made again (%d chunk calls)",
				userRows(t, db, victim.Tenant, victim.User), pendingErasures(t, db), calls.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if calls.Load() < 4 {
		t.Fatalf("%d chunk calls: the failures the test makes were not both met", calls.Load())
	}
}
