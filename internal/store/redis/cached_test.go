package redis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/postgres"
	"github.com/memgate/memgate/internal/store/storetest"
	"github.com/memgate/memgate/internal/testenv"
)

var _ storetest.Store = Cached{}

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

// TestCachedWithRedisDown: with Redis away the store saves and reads as
// ever (the engine's lookups in Tails miss: TestTailsWithRedisDown), but
// the deletes fail with memory.ErrUnavailable: an erasure cannot be
// confirmed while kept tails may survive.
func TestCachedWithRedisDown(t *testing.T) {
	ctx := context.Background()
	rdb, err := NewClient("redis://" + closedPort(t) + "/0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	logs := &syncBuffer{}
	c := Cached{Store: mustPG(t), Tails: NewTails(rdb, slog.New(slog.NewTextHandler(logs, nil)), "down:", 0)}
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
	if err := c.DeleteConversation(ctx, id); !errors.Is(err, memory.ErrUnavailable) {
		t.Fatalf("DeleteConversation with Redis down = %v, want memory.ErrUnavailable", err)
	}
	if err := c.DeleteUser(ctx, "acme", "alice"); !errors.Is(err, memory.ErrUnavailable) {
		t.Fatalf("DeleteUser with Redis down = %v, want memory.ErrUnavailable", err)
	}
	for _, secret := range []string{"q1", "a2"} {
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("log contains message content %q:\n%s", secret, logs.String())
		}
	}
}

var _ storetest.KnowledgeStore = Cached{}

// contractCache is the store, composed with Tails, that the store
// contract suites run against.
func contractCache(t *testing.T) Cached {
	return Cached{Store: mustPG(t), Tails: mustTails(t, 0)}
}

func TestCacheKnowledgeContract(t *testing.T) {
	storetest.RunKnowledge(t, func(t *testing.T) storetest.KnowledgeStore { return contractCache(t) })
}

func TestCacheErasureContract(t *testing.T) {
	storetest.RunErasure(t, func(t *testing.T) storetest.KnowledgeStore { return contractCache(t) })
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
