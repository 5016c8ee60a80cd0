package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"

	"github.com/memgate/memgate/internal/store/storetest"
	"github.com/memgate/memgate/internal/testenv"
)

var _ storetest.ChatLockStore = (*Store)(nil)

// TestChatLockContract runs the chat lock suite on two Stores over one
// database, as two gateways open it.
func TestChatLockContract(t *testing.T) {
	storetest.RunChatLocks(t, func(t *testing.T) (storetest.ChatLockStore, storetest.ChatLockStore) {
		url := testenv.PostgresURL(t)
		return mustOpenURL(t, url), mustOpenURL(t, url)
	})
}

// BenchmarkChatLock measures what the chat lock adds to a full-history
// turn's save (storetest.BenchChatLock).
func BenchmarkChatLock(b *testing.B) {
	storetest.BenchChatLock(b, mustOpen(b))
}

// withParams returns url with the query parameters params added.
func withParams(url, params string) string {
	if strings.Contains(url, "?") {
		return url + "&" + params
	}
	return url + "?" + params
}

// TestChatLocksNeverStarveTheirSaves: on a pool of n connections, n and
// n+1 chats at once each take their chat's lock and save a turn under it,
// round after round: the locks never take the connections their saves
// need, so every save gets one and every chat is stored, in time.
func TestChatLocksNeverStarveTheirSaves(t *testing.T) {
	const n, rounds = 4, 10
	for _, chats := range []int{n, n + 1} {
		t.Run(fmt.Sprint(chats, " chats"), func(t *testing.T) {
			s := mustOpenURL(t, withParams(testenv.PostgresURL(t), fmt.Sprint("pool_max_conns=", n)))
			ctx := testCtx(t)
			user := fmt.Sprint("u-", time.Now().UnixNano())
			var wg sync.WaitGroup
			errs := make(chan error, chats)
			start := make(chan struct{})
			for c := range chats {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					id := memory.Identity{Tenant: "acme", User: user, Conversation: fmt.Sprint("chat-", c)}
					for r := range rounds {
						unlock, err := s.LockChats(ctx, []memory.Identity{id})
						if err != nil {
							errs <- fmt.Errorf("chat %d round %d: lock: %w", c, r, err)
							return
						}
						_, err = s.SaveExchange(ctx, memory.Exchange{ID: fmt.Sprint("ex-", c, "-", r), Identity: id, At: time.Now(),
							Turn:  []memory.Message{{Role: "user", Content: fmt.Sprint("turn ", r)}},
							Reply: memory.Message{Role: "assistant", Content: "ok"}})
						unlock()
						if err != nil {
							errs <- fmt.Errorf("chat %d round %d: save: %w", c, r, err)
							return
						}
					}
				}()
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// TestChatLockOutlastsIdleTransactionTimeout: a chat's lock is a
// transaction held open, idle, on its connection while the holder
// stores; a server that ends sessions idle in a transaction
// (idle_in_transaction_session_timeout, here 100ms) would end it, and the
// lock with it, under a slow holder. The lock's transaction turns that
// off for itself: another handle cannot take the chat while it is held.
func TestChatLockOutlastsIdleTransactionTimeout(t *testing.T) {
	url := withParams(testenv.PostgresURL(t), "idle_in_transaction_session_timeout=100")
	a, b := mustOpenURL(t, url), mustOpenURL(t, url)
	x := []memory.Identity{{Tenant: "acme", User: "ana", Conversation: "chat-idle"}}
	unlock, err := a.LockChats(testCtx(t), x)
	if err != nil {
		t.Fatalf("LockChats: %v", err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(testCtx(t), time.Second)
	defer cancel()
	if got, err := b.LockChats(ctx, x); err == nil {
		got()
		t.Fatal("another handle took a chat whose holder still holds it, once the server ended its idle transaction")
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockChats: %v, want its context's deadline", err)
	}
}

// TestChatLockLostConnectionCannotWrite runs storetest.RunChatLockLost
// with a holder whose lock connection broke (its backend terminated).
func TestChatLockLostConnectionCannotWrite(t *testing.T) {
	url := testenv.PostgresURL(t)
	a, b := mustOpenURL(t, url), mustOpenURL(t, url)
	storetest.RunChatLockLost(t, a, b, func(t *testing.T, chats []memory.Identity) {
		_, pids := a.heldChats(chats...)
		if len(pids) == 0 {
			t.Fatal("the holder holds no lock of the chats")
		}
		for _, pid := range pids {
			if _, err := b.pool.Exec(testCtx(t), `SELECT pg_terminate_backend($1)`, pid); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestChatLockHeldWhileAnotherWaits: while a second LockChats of a chat
// the Store holds waits for it (another lane of the process, or another
// chat whose lock key is the same), the holder still holds the lock and
// stores under it: the waiter is not its holder until PostgreSQL grants
// it the lock.
func TestChatLockHeldWhileAnotherWaits(t *testing.T) {
	s := mustOpen(t)
	ctx := testCtx(t)
	ex := memory.Exchange{ID: "ex-first", Identity: memory.Identity{Tenant: "acme", User: fmt.Sprint("u-", time.Now().UnixNano()),
		Conversation: memory.DefaultConversation}, Candidate: "chat-w", Model: "m", At: time.Now(),
		Turn: []memory.Message{{Role: "user", Content: "hi"}}, Reply: memory.Message{Role: "assistant", Content: "hello"}}
	x, _ := memory.ChatOf(ex)
	unlock, err := s.LockChats(ctx, []memory.Identity{x})
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		unlock2, err := s.LockChats(ctx, []memory.Identity{x})
		if err == nil {
			unlock2()
		}
		waited <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = $1::int4::oid
			AND objid = $2::int4::oid AND objsubid = 2 AND NOT granted`, chatLockClass, chatLockKeys([]memory.Identity{x})[0]).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second LockChats never waited for the lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	res, err := s.SaveExchange(ctx, ex)
	unlock()
	if err != nil || res.Inserted != 2 {
		t.Fatalf("the holder's save while another waits for its lock: inserted %d, %v; want 2", res.Inserted, err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("the waiter's LockChats: %v", err)
	}
}
