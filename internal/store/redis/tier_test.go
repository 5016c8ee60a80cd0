package redis

import (
	"context"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/postgres"
	"github.com/memgate/memgate/internal/store/storetest"
	"github.com/memgate/memgate/internal/testenv"
)

// mustPGAt opens a PostgreSQL store on the database at url.
func mustPGAt(tb testing.TB, url string) *postgres.Store {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := postgres.Open(ctx, url, nil)
	if err != nil {
		tb.Fatalf("postgres.Open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// TestFreshnessThroughTails runs the freshness suite on two gateways
// sharing one database and one Redis, the one searched keeping no
// conversation's turns in memory: every Recent asks Redis first, so what
// Redis keeps follows every change, by either gateway or in SQL, and an
// erased user's turns never come back.
func TestFreshnessThroughTails(t *testing.T) {
	storetest.RunFreshness(t, func(t *testing.T) storetest.Replicas {
		url := testenv.PostgresURL(t)
		tails := mustTails(t, time.Minute)
		other := NewTails(tails.rdb, nil, tails.prefix, time.Minute)
		conn, err := pgx.Connect(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.Background()) })
		return storetest.Replicas{
			Mine:  storetest.CachedWith(Cached{Store: mustPGAt(t, url), Tails: tails}, tails, 0),
			Other: storetest.CachedWith(Cached{Store: mustPGAt(t, url), Tails: other}, other, cache.DefaultTailBytes),
			Exec: func(ctx context.Context, sql string) error {
				_, err := conn.Exec(ctx, sql)
				return err
			}}
	})
}

// countingReader counts the store reads of a conversation's newest turns.
type countingReader struct {
	cache.Reader
	recent *atomic.Int64
}

func (c countingReader) Recent(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error) {
	c.recent.Add(1)
	return c.Reader.Recent(ctx, id, n)
}

// TestReadsServeTurnsFromRedis: a conversation's turns one gateway read
// from the store are served from Redis to itself, when its memory keeps
// none, and to another gateway, at the same revision, without reading the
// store again; a save moves the revision, and the next read goes to the
// store. A read for more turns than Redis keeps goes to the store.
func TestReadsServeTurnsFromRedis(t *testing.T) {
	ctx := context.Background()
	pg := mustPG(t)
	tails := mustTails(t, time.Minute)
	var reads atomic.Int64
	src := countingReader{pg, &reads}
	mine := cache.NewReads(src, tails, 0, cache.DefaultKnowledgeBytes)
	other := cache.NewReads(src, tails, cache.DefaultTailBytes, cache.DefaultKnowledgeBytes)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	for n := 1; n <= 3; n++ {
		if _, err := pg.SaveExchange(ctx, say(id, n)); err != nil {
			t.Fatal(err)
		}
	}
	recent := func(step string, r *cache.Reads, n int, wantReads int64) {
		t.Helper()
		rev, err := pg.ItemRevisions(ctx, id.Tenant, id.User)
		if err != nil {
			t.Fatal(err)
		}
		before := reads.Load()
		got, err := r.Recent(ctx, &rev, id, n)
		if err != nil {
			t.Fatal(err)
		}
		want, err := pg.Recent(ctx, id, n)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(texts(got), texts(want)) || len(got) != len(want) {
			t.Fatalf("%s: Recent = %q, store %q", step, texts(got), texts(want))
		}
		for i := range got {
			if got[i].Seq != want[i].Seq || got[i].Key != want[i].Key || string(got[i].Raw) != string(want[i].Raw) ||
				!got[i].CreatedAt.Equal(want[i].CreatedAt) || got[i].Tenant != want[i].Tenant || got[i].User != want[i].User ||
				got[i].Conversation != want[i].Conversation {
				t.Fatalf("%s: message %d = %+v, store %+v", step, i, got[i], want[i])
			}
		}
		if d := reads.Load() - before; d != wantReads {
			t.Fatalf("%s: %d store reads, want %d", step, d, wantReads)
		}
		// Redis is kept off the reader's path: wait until it holds the tail.
		for !keptAt(tails, id, rev.Tail()) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	recent("first read", mine, 4, 1)
	recent("again, memory keeping nothing", mine, 4, 0)
	recent("fewer turns", mine, 2, 0)
	recent("another gateway", other, 4, 0)
	recent("more turns than kept", mine, 5, 1)
	if _, err := pg.SaveExchange(ctx, say(id, 4)); err != nil {
		t.Fatal(err)
	}
	recent("after a save", other, 4, 1)
	recent("after a save, from Redis", mine, 4, 0)
	if got := fmt.Sprint(tails.rdb.HLen(ctx, tails.key(id)).Val()); got != "1" {
		t.Fatalf("conversation's hash holds %s tails, want only the newest", got)
	}
}
