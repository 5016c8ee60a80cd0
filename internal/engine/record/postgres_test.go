package record

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/postgres"
	"github.com/memgate/memgate/internal/testenv"
)

var (
	_ BatchSaver   = (*postgres.Store)(nil)
	_ DeadLetterer = (*postgres.Store)(nil)
)

func mustPostgres(tb testing.TB) *postgres.Store {
	tb.Helper()
	return mustPostgresAt(tb, testenv.PostgresURL(tb))
}

// mustPostgresAt opens a store on the database at url (another handle on
// it, as another gateway's).
func mustPostgresAt(tb testing.TB, url string) *postgres.Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := postgres.Open(ctx, url, nil)
	if err != nil {
		tb.Fatalf("open postgres: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// texts returns the contents of a conversation's live messages, in order.
func texts(tb testing.TB, s interface {
	Recent(context.Context, memory.Identity, int) ([]memory.Message, error)
}, id memory.Identity) []string {
	tb.Helper()
	msgs, err := s.Recent(context.Background(), id, 10000)
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for _, m := range msgs {
		out = append(out, m.Content)
	}
	return out
}

func userExchange(tb testing.TB, user, conv, text string) memory.Exchange {
	ex := exchange(tb, "req-1", text, "re: "+text)
	ex.User, ex.Conversation = user, conv
	return ex
}

// TestPostgresBadMessageDoesNotBlockOthers reproduces SQLSTATE 22021: a
// queued exchange with a NUL byte (as queued before sanitizing, or by a
// client that bypasses it) shares a claimed batch with other users' turns.
// It is set aside as a dead letter; the others are stored, and the batch is
// done without waiting for any reclaim.
func TestPostgresBadMessageDoesNotBlockOthers(t *testing.T) {
	pg := mustPostgres(t)
	rq, _ := mustRedisQueue(t, testenv.RedisPrefix(t))
	for i, u := range []string{"u1", "u2", "u3", "u4"} {
		ex := userExchange(t, u, "c1", fmt.Sprint("hello ", i))
		ex.ID = NewExchangeID()
		if u == "u2" {
			ex.Turn[0].Content = "nul \x00 byte"
		}
		enqueue(t, rq, ex)
	}
	opts := fastWorker()
	opts.StaleAfter = time.Hour
	opts.Lease = rq
	w := NewWorker(rq, pg, nil, workerWithStore(opts, pg))
	mustRunWorker(t, w)
	waitFor(t, "batch done", func() bool {
		n, err := rq.Pending(context.Background())
		return err == nil && n == 0
	})
	for _, u := range []string{"u1", "u3", "u4"} {
		if got := texts(t, pg, memory.Identity{Tenant: "t1", User: u, Conversation: "c1"}); len(got) != 2 {
			t.Fatalf("user %s stored %v", u, got)
		}
	}
	if got := texts(t, pg, memory.Identity{Tenant: "t1", User: "u2", Conversation: "c1"}); len(got) != 0 {
		t.Fatalf("bad exchange stored: %v", got)
	}
	dead, err := pg.DeadLetters(context.Background(), "t1")
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0].User != "u2" || !strings.Contains(dead[0].Reason, "22021") {
		t.Fatalf("dead letters %+v", dead)
	}
	var back memory.Exchange
	if err := json.Unmarshal(dead[0].Payload, &back); err != nil || back.Turn[0].Content != "nul \x00 byte" {
		t.Fatalf("dead letter payload does not hold the exchange: %v", err)
	}
	if value(t, w.dead) != 1 {
		t.Fatalf("dead letters metric = %v", value(t, w.dead))
	}
}

// TestPostgresCaptureSanitizesAndSetsAsideTheRest: on the request path, NUL
// and invalid UTF-8 are cleaned before PostgreSQL sees them; an exchange it
// refuses anyway (an id that breaks its rules) breaks the group commit,
// and the others in the group are stored one by one while it is set aside.
func TestPostgresCaptureSanitizesAndSetsAsideTheRest(t *testing.T) {
	pg := mustPostgres(t)
	c := mustCapturer(t, nil, pg, nil, withStore(Options{Lanes: 1}, pg))
	var wg sync.WaitGroup
	for i, u := range []string{"u1", "u2", "u3", "u4", "u5"} {
		ex := userExchange(t, u, "c1", fmt.Sprint("turn ", i))
		switch u {
		case "u2":
			ex.Turn[0].Content = "nul \x00 and \xff"
			ex.Turn[0].Raw = json.RawMessage("{\"role\":\"user\",\"content\":\"nul \\u0000 and \xff\"}")
		case "u4":
			ex.Conversation = "not/an/id" // breaks the store's id rule
		}
		wg.Go(func() { c.Capture(context.Background(), ex) })
	}
	wg.Wait()
	for _, u := range []string{"u1", "u2", "u3", "u5"} {
		got := texts(t, pg, memory.Identity{Tenant: "t1", User: u, Conversation: "c1"})
		if len(got) != 2 {
			t.Fatalf("user %s stored %v", u, got)
		}
		if u == "u2" && got[0] != "nul  and \uFFFD" {
			t.Fatalf("sanitized text stored as %q", got[0])
		}
	}
	dead, err := pg.DeadLetters(context.Background(), "t1")
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0].User != "u4" {
		t.Fatalf("dead letters %+v, want u4's", dead)
	}
	if value(t, c.metrics.deadLetters) != 1 || value(t, c.metrics.dropped) != 0 {
		t.Fatalf("dead = %v dropped = %v", value(t, c.metrics.deadLetters), value(t, c.metrics.dropped))
	}
}

// TestPostgresRequestIDReuse: a reused request id, or another user's,
// never drops a turn: the stored key is minted by capture.
func TestPostgresRequestIDReuse(t *testing.T) {
	pg := mustPostgres(t)
	c := mustCapturer(t, nil, pg, nil, withStore(Options{}, pg))
	c.Capture(context.Background(), userExchange(t, "alice", "c1", "alice one"))
	c.Capture(context.Background(), userExchange(t, "alice", "c1", "alice two")) // same request id again
	c.Capture(context.Background(), userExchange(t, "mallory", "c9", "mallory")) // another user's request id
	if got := texts(t, pg, memory.Identity{Tenant: "t1", User: "alice", Conversation: "c1"}); strings.Join(got, "|") != "alice one|re: alice one|alice two|re: alice two" {
		t.Fatalf("alice stored %v", got)
	}
	if got := texts(t, pg, memory.Identity{Tenant: "t1", User: "mallory", Conversation: "c9"}); len(got) != 2 {
		t.Fatalf("mallory stored %v", got)
	}
}

// failNth fails the save of the exchanges whose turn text is in failing,
// a given number of times each.
type failNth struct {
	Saver
	mu      sync.Mutex
	failing map[string]int
}

func (f *failNth) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	f.mu.Lock()
	n := f.failing[ex.Turn[0].Content]
	if n > 0 {
		f.failing[ex.Turn[0].Content] = n - 1
	}
	f.mu.Unlock()
	if n > 0 {
		return memory.SaveResult{}, fmt.Errorf("pg: %w", memory.ErrUnavailable)
	}
	return f.Saver.SaveExchange(ctx, ex)
}

// TestPostgresRedisOrderAfterOutage reproduces the outage: a backlog in the
// Redis capture queue, saves failing for a while, and two workers draining
// it. Every turn is stored once and in the order sent, and without waiting
// for the 30s reclaim.
func TestPostgresRedisOrderAfterOutage(t *testing.T) {
	pg := mustPostgres(t)
	prefix := testenv.RedisPrefix(t)
	const convs, turns = 4, 40
	q0, _ := mustRedisQueue(t, prefix)
	for i := range turns {
		for c := range convs {
			ex := userExchange(t, "u1", fmt.Sprint("c", c), fmt.Sprintf("c%d turn %02d", c, i))
			ex.ID = NewExchangeID()
			enqueue(t, q0, ex)
		}
	}
	flaky := &failNth{Saver: pg, failing: map[string]int{"c1 turn 05": 3, "c2 turn 19": 4, "c3 turn 22": 2}}
	var workers []*Worker
	for i := range 2 {
		q, _ := mustRedisQueue(t, prefix)
		opts := fastWorker()
		opts.Consumer = fmt.Sprint("w", i)
		opts.Batch = 8
		opts.StaleAfter = 30 * time.Second
		opts.Block = 20 * time.Millisecond
		opts.Lease = q
		w := NewWorker(q, flaky, nil, opts)
		workers = append(workers, w)
		mustRunWorker(t, w)
	}
	deadline := time.Now().Add(20 * time.Second) // well under the 30s reclaim
	for {
		n, err := q0.Pending(context.Background())
		if err == nil && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backlog not drained: %d pending", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for c := range convs {
		got := texts(t, pg, memory.Identity{Tenant: "t1", User: "u1", Conversation: fmt.Sprint("c", c)})
		var want []string
		for i := range turns {
			text := fmt.Sprintf("c%d turn %02d", c, i)
			want = append(want, text, "re: "+text)
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("conversation c%d stored out of order or incomplete:\n%v", c, got)
		}
	}
	var saved float64
	for _, w := range workers {
		saved += value(t, w.saved)
	}
	if saved != convs*turns {
		t.Fatalf("saved %v, want %d", saved, convs*turns)
	}
}

// TestPostgresReadYourWritesUnderLoad: with many conversations captured
// at once, every turn is in its conversation's newest turns, read as a
// request reads them (the engine's cache, under the user's revision), as
// soon as Capture returns.
func TestPostgresReadYourWritesUnderLoad(t *testing.T) {
	pg := mustPostgres(t)
	reads := cache.NewReads(pg, nil, cache.DefaultTailBytes, cache.DefaultKnowledgeBytes)
	c := mustCapturer(t, nil, pg, nil, withStore(Options{}, pg))
	var misses atomic.Int64
	var wg sync.WaitGroup
	for conv := range 32 {
		wg.Go(func() {
			ctx := context.Background()
			id := memory.Identity{Tenant: "t1", User: "u1", Conversation: fmt.Sprint("c", conv)}
			for i := range 10 {
				text := fmt.Sprintf("c%d turn %d", conv, i)
				c.Capture(ctx, userExchange(t, "u1", id.Conversation, text))
				rev, err := pg.ItemRevisions(ctx, id.Tenant, id.User)
				if err != nil {
					misses.Add(1)
					continue
				}
				msgs, err := reads.Recent(ctx, &rev, id, 2)
				if err != nil || len(msgs) != 2 || msgs[0].Content != text {
					misses.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := misses.Load(); n != 0 {
		t.Fatalf("%d of 320 turns were not readable when Capture returned", n)
	}
}
