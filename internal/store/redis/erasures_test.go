package redis

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/memgate/memgate/internal/testenv"
)

// forgets records what an Erasures' Run asked of it.
type forgets struct {
	mu      sync.Mutex
	users   []string
	cleared int
}

func (f *forgets) Forget(tenant, user string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.users = append(f.users, tenant+"/"+user)
}

func (f *forgets) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleared++
}

func (f *forgets) state() (users []string, cleared int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.users...), f.cleared
}

// sending runs e's Send until the test ends, and returns e.
func sending(tb testing.TB, e *Erasures) *Erasures {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.Send(ctx) }()
	tb.Cleanup(func() { cancel(); <-done })
	return e
}

// until waits for cond, failing tb after a generous deadline.
func until(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestErasureNotices: a subscribed process forgets each user whose
// erasure another publishes, and forgets everyone on subscribing and on
// subscribing again after its connection was lost (the notices published
// meanwhile are lost); Run returns when its context ends.
func TestErasureNotices(t *testing.T) {
	ctx := context.Background()
	prefix := testenv.RedisPrefix(t)
	logger := slog.New(slog.DiscardHandler)
	// The subscriber's connections are named, to be found and killed.
	name := strings.ReplaceAll(strings.TrimSuffix(prefix, ":"), ":", "-")
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	opts.ClientName = name
	sub, pub := redis.NewClient(opts), mustClient(t)
	t.Cleanup(func() { _ = sub.Close() })
	received, published := NewErasures(sub, prefix, logger), sending(t, NewErasures(pub, prefix, logger))
	f := &forgets{}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); received.Run(rctx, f) }()
	subscribed := func(n int) func() bool {
		return func() bool {
			_, cleared := f.state()
			return cleared == n
		}
	}
	until(t, "the subscription", subscribed(1))

	published.Publish("acme", "noor")
	until(t, "noor forgotten", func() bool { users, _ := f.state(); return len(users) == 1 })
	if users, _ := f.state(); users[0] != "acme/noor" {
		t.Fatalf("forgot %q, want acme/noor", users[0])
	}

	// The subscriber's connection is lost: on subscribing again it
	// forgets everyone.
	list, err := pub.ClientList(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for line := range strings.SplitSeq(list, "\n") {
		if strings.Contains(line, " name="+name+" ") {
			for field := range strings.FieldsSeq(line) {
				if id, ok := strings.CutPrefix(field, "id="); ok {
					ids = append(ids, id)
				}
			}
		}
	}
	if len(ids) != 1 {
		t.Fatalf("the subscriber has %d connections, want 1", len(ids))
	}
	if err := pub.Do(ctx, "CLIENT", "KILL", "ID", ids[0]).Err(); err != nil {
		t.Fatal(err)
	}
	until(t, "everyone forgotten on subscribing again", subscribed(2))
	published.Publish("acme", "omar")
	until(t, "omar forgotten", func() bool { users, _ := f.state(); return len(users) == 2 })

	cancel()
	<-done
}

// silent is a connection that can go half-open: once mute, what is
// written to it is dropped as if sent and nothing it receives is read, so
// neither side sees an error until a deadline.
type silent struct {
	net.Conn
	mute *atomic.Bool
}

func (c silent) Write(p []byte) (int, error) {
	if c.mute.Load() {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c silent) Read(p []byte) (int, error) {
	for {
		n, err := c.Conn.Read(p)
		if err != nil || !c.mute.Load() {
			return n, err
		}
	}
}

// TestErasureNoticesReplaceAHalfOpenSubscription: a subscription whose
// connection goes silent (writes succeed, nothing arrives: the peer or a
// middlebox dropped it) is noticed by its unanswered ping and replaced,
// forgetting everyone for the notices lost meanwhile, and the notices
// after it arrive on the new one.
func TestErasureNoticesReplaceAHalfOpenSubscription(t *testing.T) {
	ctx := context.Background()
	prefix := testenv.RedisPrefix(t)
	logger := slog.New(slog.DiscardHandler)
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		mutes []*atomic.Bool
	)
	opts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		m := new(atomic.Bool)
		mu.Lock()
		mutes = append(mutes, m)
		mu.Unlock()
		return silent{Conn: c, mute: m}, nil
	}
	sub, pub := redis.NewClient(opts), mustClient(t)
	t.Cleanup(func() { _ = sub.Close() })
	received, published := NewErasures(sub, prefix, logger), sending(t, NewErasures(pub, prefix, logger))
	received.pingAfter = 100 * time.Millisecond
	f := &forgets{}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); received.Run(rctx, f) }()
	until(t, "the subscription", func() bool { _, cleared := f.state(); return cleared == 1 })

	mu.Lock()
	for _, m := range mutes { // every connection so far goes silent
		m.Store(true)
	}
	mu.Unlock()
	published.Publish("acme", "lost") // to the silent connection: lost
	until(t, "everyone forgotten on a new subscription", func() bool { _, cleared := f.state(); return cleared >= 2 })
	// Published until received: with a ping interval this short, a busy
	// machine may take a slow pong for a dead subscription and replace a
	// live one, losing a notice published between the two.
	until(t, "noor forgotten", func() bool {
		if users, _ := f.state(); slices.Contains(users, "acme/noor") {
			return true
		}
		published.Publish("acme", "noor")
		return false
	})

	cancel()
	<-done
}
