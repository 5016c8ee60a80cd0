package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/engine"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/redis"
	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/testenv"
)

// noticeLog records the erasure notices a subscribed process receives.
type noticeLog struct {
	mu      sync.Mutex
	users   map[string]int
	cleared int
}

func (l *noticeLog) Forget(tenant, user string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.users[tenant+"/"+user]++
}

func (l *noticeLog) Clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cleared++
}

// of is how many notices named the user of the default tenant.
func (l *noticeLog) of(user string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.users[memory.DefaultTenant+"/"+user]
}

func (l *noticeLog) subscribed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cleared > 0
}

// subscribeNotices subscribes another process to the erasure notices
// under prefix, over its own connection to Redis, until the test ends.
func subscribeNotices(t *testing.T, prefix string) *noticeLog {
	t.Helper()
	rdb, err := redis.NewClient(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	l := &noticeLog{users: map[string]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); redis.NewErasures(rdb, prefix, slog.New(slog.DiscardHandler)).Run(ctx, l) }()
	t.Cleanup(func() { cancel(); <-done; _ = rdb.Close() })
	eventually(t, "the subscription", l.subscribed)
	return l
}

// erasingEngine is an engine over a SQLite store whose erasures publish
// their notices under prefix over rdb, as a gateway's do.
func erasingEngine(t *testing.T, rdb *goredis.Client, prefix string) *engine.Engine {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "memgate.db"), logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	notices := redis.NewErasures(rdb, prefix, logger)
	// An attempt to publish waits for Redis longer than a test runs: see
	// TestErasureNoticeOutwaitsAnUnreachableRedis.
	notices.PublishTimeout = noticeReadTimeout
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); notices.Send(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	eng := engine.New(engine.Options{}, logger)
	eng.Use(&engine.Core{Store: withReads(config.Default(), st, nil), Notices: notices})
	return eng
}

// erasures are the ways a user's memory is erased: the user's, or one
// of their conversations.
var erasures = []struct {
	name  string
	erase func(ctx context.Context, eng *engine.Engine, user string) error
}{
	{"user erased", func(ctx context.Context, eng *engine.Engine, user string) error {
		return eng.DeleteUser(ctx, memory.DefaultTenant, user)
	}},
	{"conversation deleted", func(ctx context.Context, eng *engine.Engine, user string) error {
		err := eng.DeleteConversation(ctx, memory.Identity{Tenant: memory.DefaultTenant, User: user, Conversation: "c"})
		if errors.Is(err, memory.ErrNotFound) {
			return nil // nothing stored: deleted all the same
		}
		return err
	}},
}

// TestOneErasureOneNotice: an erasure (the engine erases twice, for the
// turns in flight) tells the other processes once. The notice of a later
// erasure (a bystander's) arriving says the earlier ones have.
func TestOneErasureOneNotice(t *testing.T) {
	prefix := testenv.RedisPrefix(t)
	rdb, err := redis.NewClient(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	received := subscribeNotices(t, prefix)
	eng := erasingEngine(t, rdb, prefix)
	ctx := context.Background()
	for _, tt := range erasures {
		t.Run(tt.name, func(t *testing.T) {
			user, bystander := "noor-"+tt.name, "omar-"+tt.name
			if err := tt.erase(ctx, eng, user); err != nil {
				t.Fatal(err)
			}
			if err := eng.DeleteUser(ctx, memory.DefaultTenant, bystander); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the bystander's notice", func() bool { return received.of(bystander) > 0 })
			if n := received.of(user); n != 1 {
				t.Fatalf("one erasure sent %d notices, want 1", n)
			}
		})
	}
}

// TestErasureNoticeOutwaitsAnUnreachableRedis: with Redis unreachable
// (what is sent to it dropped, nothing answered), an erasure answers
// without waiting for its notice — before any attempt to publish it gave
// up — and the notice reaches the other processes once Redis is back.
func TestErasureNoticeOutwaitsAnUnreachableRedis(t *testing.T) {
	prefix := testenv.RedisPrefix(t)
	g := newRedisGate(t, testenv.RedisURL(t))
	// An attempt to publish gives up at its publish timeout or the
	// client's read timeout, whichever comes first. An erasure that a
	// busy machine slows past them would find an attempt given up that
	// it never waited for; both wait longer than the test runs.
	rdb, err := redis.NewClient(withQuery(t, g.url, "read_timeout", noticeReadTimeout.String()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	received := subscribeNotices(t, prefix) // directly: not through the gate
	eng := erasingEngine(t, rdb, prefix)
	ctx := context.Background()
	for _, tt := range erasures {
		t.Run(tt.name, func(t *testing.T) {
			user := "noor-" + tt.name
			if err := rdb.Ping(ctx).Err(); err != nil { // a connection in the pool, which goes silent
				t.Fatal(err)
			}
			g.darken()
			answered := make(chan error, 1)
			go func() { answered <- tt.erase(ctx, eng, user) }()
			if err := awaitAnswer(t, answered); err != nil {
				t.Fatal(err)
			}
			if n := g.abandoned(); n > 0 {
				t.Errorf("the answer waited for %d attempts to reach Redis to give up", n)
			}
			if n := received.of(user); n != 0 {
				t.Fatalf("%d notices arrived through a Redis that drops everything", n)
			}
			g.lighten()
			eventually(t, "the notice, once Redis is back", func() bool { return received.of(user) > 0 })
		})
	}
}

// awaitAnswer waits (eventually's deadline) for the call answering on
// answered, and returns its answer.
func awaitAnswer[T any](t *testing.T, answered <-chan T) T {
	t.Helper()
	var a T
	eventually(t, "the answer", func() bool {
		select {
		case a = <-answered:
			return true
		default:
			return false
		}
	})
	return a
}

// noticeReadTimeout is how long TestErasureNoticeOutwaitsAnUnreachableRedis's
// publisher waits for an answer from Redis: longer than the test waits.
const noticeReadTimeout = 5 * time.Minute

// withQuery returns rawURL with its query parameter name set to value.
func withQuery(t *testing.T, rawURL, name, value string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(name, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// redisGate is a TCP proxy in front of Redis that can go dark, as a
// network dropping packets: while dark, what its connections carry is
// dropped, and new connections are accepted and never answered. Lit
// again, it closes the connections it darkened and forwards new ones.
type redisGate struct {
	url    string
	target string
	ln     net.Listener

	mu     sync.Mutex
	dark   bool
	conns  []net.Conn // the clients' connections accepted so far
	gaveUp int        // connections their client closed while dark
	// dropped are the commands clients sent while dark, in arrival order.
	dropped []gateCommand
}

// gateCommand is a command a redisGate dropped: its name, and when it came.
type gateCommand struct {
	name string
	at   time.Time
}

// newRedisGate returns a lit gate in front of the Redis at redisURL,
// closed when the test ends.
func newRedisGate(t *testing.T, redisURL string) *redisGate {
	t.Helper()
	u, err := url.Parse(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &redisGate{target: u.Host, ln: ln}
	u.Host = ln.Addr().String()
	g.url = u.String()
	go g.serve()
	t.Cleanup(func() {
		_ = ln.Close()
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, c := range g.conns {
			_ = c.Close()
		}
	})
	return g
}

func (g *redisGate) serve() {
	for {
		c, err := g.ln.Accept()
		if err != nil {
			return
		}
		g.mu.Lock()
		g.conns = append(g.conns, c)
		dark := g.dark
		g.mu.Unlock()
		var up net.Conn
		if !dark {
			if up, err = net.Dial("tcp", g.target); err != nil {
				_ = c.Close()
				continue
			}
			go g.pipe(up, c, false)
		}
		go g.pipe(c, up, true)
	}
}

// pipe copies from src to dst (nil: nowhere) while the gate is lit, and
// drops what it reads while dark. fromClient: src is the client's, whose
// closing while dark is an attempt given up.
func (g *redisGate) pipe(src, dst net.Conn, fromClient bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		g.mu.Lock()
		dark := g.dark
		if err != nil && fromClient && dark && errors.Is(err, io.EOF) {
			g.gaveUp++
		}
		g.mu.Unlock()
		if err != nil {
			if dst != nil {
				_ = dst.Close()
			}
			return
		}
		if dark || dst == nil {
			if fromClient && n > 0 {
				g.drop(buf[:n])
			}
			continue
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			_ = src.Close()
			return
		}
	}
}

// respCommand matches the start of a RESP command: an array whose first
// element is a bulk string, the command's name.
var respCommand = regexp.MustCompile(`\*[0-9]+\r\n\$[0-9]+\r\n([A-Za-z]+)\r\n`)

// drop records the commands in b, which a client sent while g was dark.
func (g *redisGate) drop(b []byte) {
	at := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range respCommand.FindAllSubmatch(b, -1) {
		g.dropped = append(g.dropped, gateCommand{name: strings.ToUpper(string(m[1])), at: at})
	}
}

// droppedBetween returns the names of the commands g dropped from from to
// to, each with how often it came.
func (g *redisGate) droppedBetween(from, to time.Time) map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]int{}
	for _, c := range g.dropped {
		if !c.at.Before(from) && !c.at.After(to) {
			out[c.name]++
		}
	}
	return out
}

// darken makes g drop everything, counting anew the attempts given up.
func (g *redisGate) darken() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dark, g.gaveUp = true, 0
}

// lighten closes the connections g darkened and forwards new ones.
func (g *redisGate) lighten() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.dark = false
	for _, c := range g.conns {
		_ = c.Close()
	}
	g.conns = nil
}

// abandoned is how many connections their client closed while g was dark.
func (g *redisGate) abandoned() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gaveUp
}
