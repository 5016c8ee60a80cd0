package postgres

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/testenv"
)

// freezer stands in for a process that froze (stopped, or cut off without
// a reset): while frozen its connections send nothing, and the server,
// which still sees them open, hears nothing from it.
type freezer struct{ frozen atomic.Bool }

// frozenConn is a connection of a process a freezer freezes.
type frozenConn struct {
	net.Conn
	f *freezer
}

func (c *frozenConn) Write(p []byte) (int, error) {
	for c.f.frozen.Load() {
		time.Sleep(5 * time.Millisecond)
	}
	return c.Conn.Write(p)
}

// openFreezable opens a Store on url whose connections f freezes.
func openFreezable(t *testing.T, url string, f *freezer) *Store {
	t.Helper()
	dialer := &net.Dialer{}
	s, err := open(testCtx(t), url, slog.New(slog.DiscardHandler), func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &frozenConn{Conn: c, f: f}, nil
	})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	t.Cleanup(func() { f.frozen.Store(false) }) // before the Close
	return s
}

// TestChatLockOfAFrozenHolderRunsOut: a holder whose process froze while
// it held a chat's lock (its connections silent, never closed) keeps it a
// lease at most: the server ends its lock's idle transaction, and another
// gateway takes the chat — a capture queue waiting for that chat is not
// stalled for ever. Thawed, the holder stores nothing under the lock it
// lost.
func TestChatLockOfAFrozenHolderRunsOut(t *testing.T) {
	const lease = 2 * time.Second
	url := testenv.PostgresURL(t)
	f := &freezer{}
	a, b := openFreezable(t, url, f), mustOpenURL(t, url)
	a.chatLockTTL = lease
	ex, x, unlock := lockFirstTurn(t, a, "chat-f")
	f.frozen.Store(true)
	ctx, cancel := context.WithTimeout(testCtx(t), 20*lease)
	_, release, err := b.LockChats(ctx, []memory.Identity{x})
	cancel()
	f.frozen.Store(false)
	defer unlock()
	if err != nil {
		t.Fatalf("another handle's LockChats of a frozen holder's chat: %v, want it taken once the holder's lease ran out", err)
	}
	defer release()
	if _, err := a.SaveExchange(testCtx(t), ex); !errors.Is(err, memory.ErrLockLost) {
		t.Fatalf("the thawed holder's save under its lost lock: %v, want memory.ErrLockLost", err)
	}
}

// TestChatLockRenewedPastItsLease: a live holder keeps a chat's lock
// however long it holds it, past its lease many times over: it renews it
// on the lock's connection, and another handle cannot take the chat
// meanwhile. Its save under the lock then goes through.
func TestChatLockRenewedPastItsLease(t *testing.T) {
	const lease = 4 * time.Second
	url := testenv.PostgresURL(t)
	a, b := mustOpenURL(t, url), mustOpenURL(t, url)
	a.chatLockTTL = lease
	ex, x, unlock := lockFirstTurn(t, a, "chat-r")
	defer unlock()
	ctx, cancel := context.WithTimeout(testCtx(t), 2*lease)
	defer cancel()
	if _, got, err := b.LockChats(ctx, []memory.Identity{x}); err == nil {
		got()
		t.Fatal("another handle took a chat whose live holder still holds it, past its lease")
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("LockChats: %v, want its context's deadline", err)
	}
	if res, err := a.SaveExchange(testCtx(t), ex); err != nil || res.Inserted != 2 {
		t.Fatalf("the holder's save past its lease: inserted %d, %v; want 2", res.Inserted, err)
	}
}

// TestOpenRefusesAPoolOfOne: a chat's turns are stored only under its
// chat lock, which holds a connection while they are saved on another; a
// pool of one connection could store none of them, so Open refuses it.
func TestOpenRefusesAPoolOfOne(t *testing.T) {
	s, err := Open(testCtx(t), withParams(testenv.PostgresURL(t), "pool_max_conns=1"), nil)
	if err == nil {
		s.Close()
		t.Fatal("Open took a pool of one connection")
	}
	if !strings.Contains(err.Error(), "pool_max_conns") {
		t.Fatalf("Open: %v, want it to name pool_max_conns", err)
	}
}
