package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	neturl "net/url"
	"strings"
	"sync"
	"sync/atomic"
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
						_, unlock, err := s.LockChats(ctx, []memory.Identity{id})
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
	_, unlock, err := a.LockChats(testCtx(t), x)
	if err != nil {
		t.Fatalf("LockChats: %v", err)
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(testCtx(t), time.Second)
	defer cancel()
	if _, got, err := b.LockChats(ctx, x); err == nil {
		got()
		t.Fatal("another handle took a chat whose holder still holds it, once the server ended its idle transaction")
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockChats: %v, want its context's deadline", err)
	}
}

// TestChatLockLostConnectionCannotWrite runs storetest.RunChatLockLost
// with a holder whose lock connection broke (its backend terminated),
// connected directly and behind a pooler (openPooled).
func TestChatLockLostConnectionCannotWrite(t *testing.T) {
	for _, pooled := range []bool{false, true} {
		t.Run(fmt.Sprint("pooled=", pooled), func(t *testing.T) {
			url := testenv.PostgresURL(t)
			a, b := mustOpenURL(t, url), mustOpenURL(t, url)
			if pooled {
				a = openPooled(t, url)
			}
			storetest.RunChatLockLost(t, a, b, func(t *testing.T, chats []memory.Identity) {
				terminateChatLocks(t, a, b, chats)
			})
		})
	}
}

// TestChatLockBehindPooler: behind a connection pooler the pid a
// connection is given at connect (BackendKeyData) is the pooler's, no
// server backend's (openPooled). The lock's holder is named by its
// server backend's pid, the one that holds the lock in pg_locks, so the
// holder's saves under it are stored, not refused as a lost lock.
func TestChatLockBehindPooler(t *testing.T) {
	s := openPooled(t, testenv.PostgresURL(t))
	ctx := testCtx(t)
	ex, x, unlock := lockFirstTurn(t, s, "chat-p")
	defer unlock()
	keys, pids, _ := s.heldChats(ex.Fence, x)
	if len(pids) != 1 {
		t.Fatalf("the Store holds %d locks of the chat, want 1", len(pids))
	}
	var holders int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = $1::int4::oid
		AND objid = $2::int4::oid AND objsubid = 2 AND granted AND pid = $3`, chatLockClass, keys[0], pids[0]).Scan(&holders); err != nil {
		t.Fatal(err)
	}
	if holders != 1 {
		t.Errorf("the recorded holder, pid %d, is no backend holding the chat's lock", pids[0])
	}
	res, err := s.SaveExchange(ctx, ex)
	if err != nil || res.Inserted != 2 {
		t.Fatalf("the holder's save behind a pooler: inserted %d, %v; want 2", res.Inserted, err)
	}
}

// openPooled opens a Store on url whose connections are each given, at
// connect, a pid of no server backend, as a pooler such as pgbouncer
// gives its clients (its own, for its cancel requests).
func openPooled(t *testing.T, url string) *Store {
	t.Helper()
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("sslmode", "disable") // the stand-in reads the server's messages in the clear
	u.RawQuery = q.Encode()
	var fakes atomic.Int32
	fakes.Store(1 << 30) // above any pid_max
	dialer := &net.Dialer{}
	s, err := open(testCtx(t), u.String(), slog.New(slog.DiscardHandler), func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &poolerConn{Conn: c, pid: uint32(fakes.Add(1)), startup: true}, nil
	})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// poolerConn is a connection to the server whose BackendKeyData message,
// the last of the server's start-up messages to carry a pid, names pid
// in place of its backend's.
type poolerConn struct {
	net.Conn
	pid     uint32
	startup bool   // BackendKeyData not seen yet
	in, out []byte // the server's bytes: read, not yet whole messages; ready for the client
}

func (c *poolerConn) Read(p []byte) (int, error) {
	for c.startup && len(c.out) == 0 {
		for c.startup && len(c.in) >= 5 {
			n := 1 + int(binary.BigEndian.Uint32(c.in[1:5]))
			if len(c.in) < n {
				break
			}
			if c.in[0] == 'K' && n >= 9 {
				binary.BigEndian.PutUint32(c.in[5:9], c.pid)
				c.startup = false
			}
			c.out, c.in = append(c.out, c.in[:n]...), c.in[n:]
		}
		if !c.startup {
			c.out, c.in = append(c.out, c.in...), nil
			break
		}
		if len(c.out) > 0 {
			break
		}
		buf := make([]byte, 4096)
		n, err := c.Conn.Read(buf)
		c.in = append(c.in, buf[:n]...)
		if err != nil {
			return 0, err
		}
	}
	if len(c.out) > 0 {
		n := copy(p, c.out)
		c.out = c.out[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// TestChatLockHeldWhileAnotherWaits: while a second LockChats of a chat
// the Store holds waits for it (another lane of the process, or another
// chat whose lock key is the same), the holder still holds the lock and
// stores under it: the waiter is not its holder until PostgreSQL grants
// it the lock.
func TestChatLockHeldWhileAnotherWaits(t *testing.T) {
	s := mustOpen(t)
	ctx := testCtx(t)
	ex, x, unlock := lockFirstTurn(t, s, "chat-w")
	waited := make(chan error, 1)
	go func() {
		_, unlock2, err := s.LockChats(ctx, []memory.Identity{x})
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

// lockFirstTurn returns the first turn of a new user's chat, with
// candidate, and the chat, whose lock it takes on s (the turn's Fence).
func lockFirstTurn(t *testing.T, s *Store, candidate string) (ex memory.Exchange, chat memory.Identity, unlock func()) {
	t.Helper()
	ex = memory.Exchange{ID: "ex-first", Identity: memory.Identity{Tenant: "acme", User: fmt.Sprint("u-", time.Now().UnixNano()),
		Conversation: memory.DefaultConversation}, Candidate: candidate, Model: "m", At: time.Now(),
		Turn: []memory.Message{{Role: "user", Content: "hi"}}, Reply: memory.Message{Role: "assistant", Content: "hello"}}
	chat, _ = memory.ChatOf(ex)
	fence, unlock, err := s.LockChats(testCtx(t), []memory.Identity{chat})
	if err != nil {
		t.Fatal(err)
	}
	ex.Fence = fence
	return ex, chat, unlock
}

// TestChatLockStalledAfterSave runs storetest.RunChatLockStalledAfterSave
// with a holder whose lock connection broke right after its save.
func TestChatLockStalledAfterSave(t *testing.T) {
	url := testenv.PostgresURL(t)
	a, b := mustOpenURL(t, url), mustOpenURL(t, url)
	storetest.RunChatLockStalledAfterSave(t, a, b, func(t *testing.T, chats []memory.Identity) {
		terminateChatLocks(t, a, b, chats)
	})
}

// terminateChatLocks breaks, from b, the connections a holds chats' locks
// on (their backends terminated): a's locks are lost.
func terminateChatLocks(t *testing.T, a, b *Store, chats []memory.Identity) {
	t.Helper()
	var pids []int32
	for _, k := range chatLockKeys(chats) {
		pids = append(pids, a.holds.Holders(k)...)
	}
	if len(pids) == 0 {
		t.Fatal("the holder holds no lock of the chats")
	}
	for _, pid := range pids {
		var ended bool
		if err := b.pool.QueryRow(testCtx(t), `SELECT pg_terminate_backend($1)`, pid).Scan(&ended); err != nil || !ended {
			t.Fatalf("pg_terminate_backend(%d) of the holder's lock connection: %v, %v", pid, ended, err)
		}
	}
}
