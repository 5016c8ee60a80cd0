package redis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/postgres"
	"github.com/memgate/memgate/internal/store/storetest"
	"github.com/memgate/memgate/internal/testenv"
)

var _ storetest.Store = Cached{}

// countingBackend counts the Recent calls that reach the backend.
type countingBackend struct {
	Backend
	mu     sync.Mutex
	recent int
}

func (b *countingBackend) Recent(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error) {
	b.mu.Lock()
	b.recent++
	b.mu.Unlock()
	return b.Backend.Recent(ctx, id, n)
}

func (b *countingBackend) recents() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.recent
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// mustPG opens a PostgreSQL store on a fresh database.
func mustPG(tb testing.TB) *postgres.Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := postgres.Open(ctx, testenv.PostgresURL(tb), nil)
	if err != nil {
		tb.Fatalf("postgres.Open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// mustCache returns a cache on the test Redis in front of backend.
func mustCache(tb testing.TB, backend Backend, cfg CacheConfig) (*Cache, *redis.Client) {
	tb.Helper()
	rdb := mustClient(tb)
	cfg.Prefix = testenv.RedisPrefix(tb)
	return NewCache(rdb, backend, nil, cfg), rdb
}

func TestCacheContract(t *testing.T) {
	storetest.RunStore(t, func(t *testing.T) storetest.Store { return contractCache(t) })
}

// say builds the n-th exchange of a conversation.
func say(id memory.Identity, n int) memory.Exchange {
	return memory.Exchange{
		ID: fmt.Sprintf("%s-%d", id.Conversation, n), Identity: id, At: time.Now(),
		Turn:  []memory.Message{{Role: "user", Content: fmt.Sprintf("q%d", n), Raw: []byte(fmt.Sprintf(`{"role":"user","content":"q%d"}`, n))}},
		Reply: memory.Message{Role: "assistant", Content: fmt.Sprintf("a%d", n)},
	}
}

func texts(msgs []memory.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(m.Content + " ")
	}
	return strings.TrimSpace(b.String())
}

func TestCacheServesRecentFromRedis(t *testing.T) {
	ctx := context.Background()
	backend := &countingBackend{Backend: mustPG(t)}
	c, rdb := mustCache(t, backend, CacheConfig{Window: 4, TTL: time.Minute})
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	for n := 1; n <= 3; n++ {
		if _, err := c.SaveExchange(ctx, say(id, n)); err != nil {
			t.Fatal(err)
		}
	}
	direct, err := backend.Backend.Recent(ctx, id, 4)
	if err != nil {
		t.Fatal(err)
	}
	if got := rdb.LLen(ctx, c.listKey(id)).Val(); got != 4 {
		t.Fatalf("cached list length = %d, want the window of 4", got)
	}
	before := backend.recents()
	tests := []struct {
		n       int
		want    string
		backend bool // whether the call may reach the backend
	}{
		{1, "a3", false},
		{3, "a2 q3 a3", false},
		{4, "q2 a2 q3 a3", false},
		{5, "a1 q2 a2 q3 a3", true}, // beyond the window
		{0, "", false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.n), func(t *testing.T) {
			calls := backend.recents()
			got, err := c.Recent(ctx, id, tt.n)
			if err != nil {
				t.Fatal(err)
			}
			if texts(got) != tt.want {
				t.Fatalf("Recent(%d) = %q, want %q", tt.n, texts(got), tt.want)
			}
			if reached := backend.recents() > calls; reached != tt.backend {
				t.Fatalf("Recent(%d) reached the backend: %v, want %v", tt.n, reached, tt.backend)
			}
		})
	}
	got, _ := c.Recent(ctx, id, 4)
	for i := range got {
		d := direct[i]
		if got[i].Seq != d.Seq || got[i].Key != d.Key || !bytes.Equal(got[i].Raw, d.Raw) || !got[i].CreatedAt.Equal(d.CreatedAt) ||
			got[i].Tenant != d.Tenant || got[i].User != d.User || got[i].Conversation != d.Conversation {
			t.Fatalf("cached message %d = %+v, want %+v", i, got[i], d)
		}
	}
	if backend.recents()-before != 1 {
		t.Fatalf("backend Recent called %d times, want once (the n=5 call)", backend.recents()-before)
	}
	if ttl := rdb.PTTL(ctx, c.listKey(id)).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("cached list TTL = %v, want within 1m", ttl)
	}
}

func TestCacheReadThroughAndInvalidation(t *testing.T) {
	ctx := context.Background()
	pg := mustPG(t)
	backend := &countingBackend{Backend: pg}
	c, rdb := mustCache(t, backend, CacheConfig{Window: 10})
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	other := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c2"}
	// Stored behind the cache's back: the first read misses, then fills.
	for _, x := range []memory.Identity{id, other} {
		if _, err := pg.SaveExchange(ctx, say(x, 1)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if got, err := c.Recent(ctx, id, 2); err != nil || texts(got) != "q1 a1" {
			t.Fatalf("read %d: Recent = %q, %v", i, texts(got), err)
		}
	}
	if backend.recents() != 1 {
		t.Fatalf("backend reads = %d, want 1 (miss, then hit)", backend.recents())
	}
	if _, err := c.Recent(ctx, other, 2); err != nil {
		t.Fatal(err)
	}

	// An edit supersedes the reply: the cache must show the new branch.
	edit := memory.Exchange{ID: "edit", Identity: id, At: time.Now(),
		Prior: []memory.Message{{Role: "user", Content: "q1"}},
		Reply: memory.Message{Role: "assistant", Content: "a1 regenerated"}}
	if res, err := c.SaveExchange(ctx, edit); err != nil || res.Superseded != 1 {
		t.Fatalf("edit = %+v, %v; want 1 superseded", res, err)
	}
	if got, _ := c.Recent(ctx, id, 10); texts(got) != "q1 a1 regenerated" {
		t.Fatalf("Recent after edit = %q", texts(got))
	}

	if err := c.DeleteConversation(ctx, id); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, c.listKey(id)).Val(); n != 0 {
		t.Fatal("cached window survived DeleteConversation")
	}
	// A refill racing with the delete (read before it, written after) is refused.
	if err := c.fill(ctx, id, []memory.Message{{Seq: 5, Role: "user", Content: "stale"}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.Recent(ctx, id, 10); len(got) != 0 {
		t.Fatalf("Recent after delete = %q, want nothing", texts(got))
	}

	if got, _ := c.Recent(ctx, other, 2); texts(got) != "q1 a1" {
		t.Fatalf("other conversation = %q", texts(got))
	}
	if err := c.DeleteUser(ctx, "acme", "alice"); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{c.listKey(other), c.userKey("acme", "alice")} {
		if rdb.Exists(ctx, k).Val() != 0 {
			t.Fatalf("key %s survived DeleteUser", k)
		}
	}
	if got, _ := c.Recent(ctx, other, 2); len(got) != 0 {
		t.Fatalf("Recent after DeleteUser = %q", texts(got))
	}
}

func TestCacheFillNeverGoesBackInTime(t *testing.T) {
	ctx := context.Background()
	c, _ := mustCache(t, mustPG(t), CacheConfig{Window: 10})
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c"}
	fresh := []memory.Message{{Seq: 1, Content: "one"}, {Seq: 2, Content: "two"}}
	tests := []struct {
		name string
		fill []memory.Message
		want string
	}{
		{"first fill", fresh[:1], "one"},
		{"fresher fill replaces", fresh, "one two"},
		{"older snapshot refused", fresh[:1], "one two"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := c.fill(ctx, id, tt.fill); err != nil {
				t.Fatal(err)
			}
			got, _, err := c.readWindow(ctx, id, 10)
			if err != nil || texts(got) != tt.want {
				t.Fatalf("cached = %q, %v; want %q", texts(got), err, tt.want)
			}
		})
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestCacheFallsBackWhenRedisIsDown(t *testing.T) {
	ctx := context.Background()
	rdb, err := NewClient("redis://" + closedPort(t) + "/0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	logs := &syncBuffer{}
	pg := mustPG(t)
	c := Cached{Store: pg, Cache: NewCache(rdb, pg, slog.New(slog.NewTextHandler(logs, nil)), CacheConfig{Prefix: "down:"})}
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}

	for n := 1; n <= 2; n++ {
		res, err := c.SaveExchange(ctx, say(id, n))
		if err != nil || res.Inserted != 2 {
			t.Fatalf("SaveExchange with Redis down = %+v, %v; want 2 inserted", res, err)
		}
	}
	got, err := c.Recent(ctx, id, 3)
	if err != nil {
		t.Fatalf("Recent with Redis down: %v", err)
	}
	if texts(got) != "a1 q2 a2" {
		t.Fatalf("Recent with Redis down = %q, want %q", texts(got), "a1 q2 a2")
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping (the store) with Redis down: %v", err)
	}
	if err := c.PingCache(ctx); !errors.Is(err, memory.ErrUnavailable) {
		t.Fatalf("PingCache = %v, want memory.ErrUnavailable", err)
	}
	// Erasure cannot be confirmed while cached copies may survive.
	if err := c.DeleteUser(ctx, "acme", "alice"); !errors.Is(err, memory.ErrUnavailable) {
		t.Fatalf("DeleteUser with Redis down = %v, want memory.ErrUnavailable", err)
	}
	out := logs.String()
	if !strings.Contains(out, "level=WARN") {
		t.Fatalf("no warning logged:\n%s", out)
	}
	for _, secret := range []string{"q1", "a2"} {
		if strings.Contains(out, secret) {
			t.Fatalf("log contains message content %q:\n%s", secret, out)
		}
	}
}

var _ storetest.KnowledgeStore = Cached{}

// contractCache is the Cache, composed with its store, that the store
// contract suites run against.
func contractCache(t *testing.T) Cached {
	pg := mustPG(t)
	c, _ := mustCache(t, pg, CacheConfig{Window: 6})
	return Cached{Store: pg, Cache: c}
}

func TestCacheKnowledgeContract(t *testing.T) {
	storetest.RunKnowledge(t, func(t *testing.T) storetest.KnowledgeStore { return contractCache(t) })
}

func TestCacheErasureContract(t *testing.T) {
	storetest.RunErasure(t, func(t *testing.T) storetest.KnowledgeStore { return contractCache(t) })
}

// TestCacheGroupSaveRefreshesEveryWindow: a group commit over several
// conversations refreshes each one's cached window (in one backend query
// and one Redis round trip), even after Redis forgot its scripts.
func TestCacheGroupSaveRefreshesEveryWindow(t *testing.T) {
	ctx := context.Background()
	pg := mustPG(t)
	c, rdb := mustCache(t, pg, CacheConfig{Window: 4, TTL: time.Minute})
	var ids []memory.Identity
	for i := range 3 {
		id := memory.Identity{Tenant: "acme", User: fmt.Sprint("u", i), Conversation: "c1"}
		ids = append(ids, id)
		if _, err := c.SaveExchange(ctx, say(id, 1)); err != nil {
			t.Fatal(err)
		}
	}
	for round, flush := range []bool{false, true} {
		if flush {
			if err := rdb.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		var exs []memory.Exchange
		for _, id := range ids {
			exs = append(exs, say(id, round+2))
		}
		if _, err := c.SaveExchanges(ctx, exs); err != nil {
			t.Fatalf("SaveExchanges: %v", err)
		}
		for _, id := range ids {
			want, err := pg.Recent(ctx, id, 4)
			if err != nil {
				t.Fatal(err)
			}
			cached, hit, err := c.readWindow(ctx, id, 4)
			if err != nil || !hit {
				t.Fatalf("round %d, %s: window not cached (hit %v, %v)", round, id.User, hit, err)
			}
			if texts(cached) != texts(want) || !strings.HasSuffix(texts(cached), fmt.Sprintf("a%d", round+2)) {
				t.Fatalf("round %d, %s: cached %q, store %q", round, id.User, texts(cached), texts(want))
			}
		}
	}
}

var _ storetest.AdoptStore = Cached{}

func TestCacheAdoptContract(t *testing.T) {
	storetest.RunAdopt(t, func(t *testing.T) storetest.AdoptStore { return contractCache(t) })
}

var _ storetest.RankingStore = Cached{}

// TestCacheRankingContract runs the ranking suite through the Cache: full
// text search and the turns around recalled messages are the backend's,
// unchanged.
func TestCacheRankingContract(t *testing.T) {
	storetest.RunRanking(t, func(t *testing.T) storetest.RankingStore { return contractCache(t) })
}

// TestCacheCommonTerms: the words most of a user's items hold come from
// the backend's term statistics through the Cache.
func TestCacheCommonTerms(t *testing.T) {
	ctx := context.Background()
	c := contractCache(t)
	var items []memory.Item
	for i := range 6 {
		text := fmt.Sprintf("Caroline says hello number %d", i)
		if i == 0 {
			text = "Caroline painted a sunrise"
		}
		items = append(items, memory.Item{Tenant: "acme", User: "alice", Conversation: "c1", Kind: "message",
			Ref: fmt.Sprintf("m%d", i), Text: text, CreatedAt: time.Unix(int64(1000+i), 0)})
	}
	if err := c.AddItems(ctx, items); err != nil {
		t.Fatal(err)
	}
	got, err := c.CommonTerms(ctx, nil, "acme", "alice", []string{"caroline", "sunrise"}, 2, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"caroline"}) {
		t.Fatalf("CommonTerms = %q, want [caroline]", got)
	}
}

// TestCacheAppendsWhatSavesStored follows one conversation's cached window
// through saves that only append (the stored messages are appended, without
// reading the window from the store again), a save that bypassed the cache
// (another gateway's, whose window update has not arrived), a stale refill,
// late appends,
// an edit that supersedes turns, and a group save: after each, the window
// Redis holds is the store's newest live messages.
func TestCacheAppendsWhatSavesStored(t *testing.T) {
	ctx := context.Background()
	pg := mustPG(t)
	backend := &countingBackend{Backend: pg}
	c, _ := mustCache(t, backend, CacheConfig{Window: 4, TTL: time.Minute})
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	other := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c2"}
	save := func(ex memory.Exchange) {
		t.Helper()
		if _, err := c.SaveExchange(ctx, ex); err != nil {
			t.Fatal(err)
		}
	}
	// same checks the cached window is the store's (a read may reload it
	// first when reload), and whether reading it reached the store.
	same := func(step string, id memory.Identity, reload bool) {
		t.Helper()
		before := backend.recents()
		got, err := c.Recent(ctx, id, 4)
		if err != nil {
			t.Fatal(err)
		}
		if reached := backend.recents() > before; reached != reload {
			t.Fatalf("%s: read reached the store: %v, want %v", step, reached, reload)
		}
		want, err := pg.Recent(ctx, id, 4)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: cached window\n%+v\nstore\n%+v", step, got, want)
		}
	}
	save(say(id, 1)) // no window cached: the save reads it from the store
	same("first save", id, false)
	before := backend.recents()
	save(say(id, 2))
	save(say(id, 3))
	if backend.recents() != before {
		t.Fatalf("saves that only appended read the window from the store %d times", backend.recents()-before)
	}
	same("appended", id, false)

	// Another gateway's save: this cache's window misses a4 and q4.
	if _, err := pg.SaveExchange(ctx, say(id, 4)); err != nil {
		t.Fatal(err)
	}
	stale, _, err := c.readWindow(ctx, id, 4)
	if err != nil {
		t.Fatal(err)
	}
	save(say(id, 5)) // cannot append after a gap: the window is read again
	if err := c.fill(ctx, id, stale); err != nil {
		t.Fatal(err)
	}
	same("after a save this cache did not see, and a stale refill", id, false)

	// An edit of turn 5 supersedes it: the window is read again.
	edit := say(id, 6)
	edit.Prior = []memory.Message{
		{Role: "user", Content: "q4", Raw: []byte(`{"role":"user","content":"q4"}`)},
		{Role: "assistant", Content: "a4"},
	}
	edit.Turn[0].Content, edit.Turn[0].Raw = "q5 edited", []byte(`{"role":"user","content":"q5 edited"}`)
	res, err := c.SaveExchange(ctx, edit)
	if err != nil || res.Superseded == 0 {
		t.Fatalf("edit: %+v, %v", res, err)
	}
	same("after an edit", id, false)

	// A group save: two turns of c1 and one of c2, appended in order.
	save(say(other, 1))
	same("other conversation", other, false)
	before = backend.recents()
	results, err := c.SaveExchanges(ctx, []memory.Exchange{say(id, 7), say(other, 2), say(id, 8)})
	if err != nil {
		t.Fatal(err)
	}
	if backend.recents() != before {
		t.Fatalf("a group save that only appended read windows from the store %d times", backend.recents()-before)
	}
	same("group save", id, false)
	same("group save, other conversation", other, false)

	// An append that arrives late, after a fresher window, changes nothing.
	if failed := c.appendAll(ctx, []memory.Identity{id}, [][]memory.Message{results[0].Stored}); failed != nil {
		t.Fatalf("late append failed for %v", failed)
	}
	same("late append", id, false)
	// Nor does one after the conversation was deleted.
	if err := c.DeleteConversation(ctx, other); err != nil {
		t.Fatal(err)
	}
	if failed := c.appendAll(ctx, []memory.Identity{other}, [][]memory.Message{results[1].Stored}); failed != nil {
		t.Fatalf("append after the delete failed for %v", failed)
	}
	if got, hit, err := c.readWindow(ctx, other, 4); err != nil || hit {
		t.Fatalf("deleted conversation's window came back: %q, %v", texts(got), err)
	}
}
