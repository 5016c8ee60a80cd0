package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/testenv"
)

var _ cache.TailTier = (*Tails)(nil)

// mustTails returns Tails on the test Redis under a prefix of its own.
func mustTails(tb testing.TB, ttl time.Duration) *Tails {
	tb.Helper()
	return NewTails(mustClient(tb), nil, testenv.RedisPrefix(tb), ttl)
}

// tailOf returns n messages of id's conversation, seqs from first.
func tailOf(id memory.Identity, first int64, n int) []memory.Message {
	msgs := make([]memory.Message, n)
	for i := range msgs {
		seq := first + int64(i)
		msgs[i] = memory.Message{Tenant: id.Tenant, User: id.User, Conversation: id.Conversation,
			Seq: seq, Key: fmt.Sprint("k", seq), Role: "user", Content: fmt.Sprint("m", seq),
			Raw: []byte(fmt.Sprintf(`{"role":"user","content":"m%d"}`, seq)), Tokens: int(seq),
			CreatedAt: time.Unix(1700000000+seq, 0).UTC()}
		if seq%2 == 0 {
			msgs[i].Role, msgs[i].Raw = "assistant", nil // a reply kept without its JSON
		}
	}
	return msgs
}

// TestTailsServeOnlyTheRevisionKept: a tail is served at the revision it
// was kept at, exactly as kept, and at no other (each lookup counted as a
// hit or a miss); keeping it again at a later revision replaces it.
func TestTailsServeOnlyTheRevisionKept(t *testing.T) {
	ctx := context.Background()
	tails := mustTails(t, time.Minute)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	other := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c2"}
	kept := tailOf(id, 1, 3)
	tails.KeepTail(ctx, id, 7, kept, true)

	tests := []struct {
		name string
		id   memory.Identity
		rev  int64
		ok   bool
	}{
		{"the revision kept", id, 7, true},
		{"an earlier revision", id, 6, false},
		{"a later revision", id, 8, false},
		{"another conversation", other, 7, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, all, ok := tails.Tail(ctx, tt.id, tt.rev)
			if ok != tt.ok {
				t.Fatalf("Tail(%s, %d) ok = %v, want %v", tt.id.Conversation, tt.rev, ok, tt.ok)
			}
			if ok && (!all || !reflect.DeepEqual(msgs, kept)) {
				t.Fatalf("Tail = %+v (all %v), want %+v (all)", msgs, all, kept)
			}
		})
	}

	if h, m := counted(t, tails.hits), counted(t, tails.misses); h != 1 || m != 3 {
		t.Fatalf("counted %v hits and %v misses, want 1 and 3", h, m)
	}

	newer := tailOf(id, 2, 3)
	tails.KeepTail(ctx, id, 9, newer, false)
	if _, _, ok := tails.Tail(ctx, id, 7); ok {
		t.Fatal("the tail kept at 7 is still served after one was kept at 9")
	}
	if msgs, all, ok := tails.Tail(ctx, id, 9); !ok || all || !reflect.DeepEqual(msgs, newer) {
		t.Fatalf("Tail at 9 = %+v (all %v, ok %v), want %+v", msgs, all, ok, newer)
	}
	if ttl := tails.rdb.PTTL(ctx, tails.key(id)).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("kept tail's TTL = %v, want within 1m", ttl)
	}
}

// TestTailsForgetLeavesNothing: after Forget nothing of the user is left in
// Redis but the record of the change, a tail read before it and kept after
// it is refused, one read after it is kept as usual, and a record never
// goes back. Count counts the user's tails.
func TestTailsForgetLeavesNothing(t *testing.T) {
	ctx := context.Background()
	tails := mustTails(t, time.Minute)
	a1 := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	a2 := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c2"}
	bob := memory.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}
	for _, id := range []memory.Identity{a1, a2, bob} {
		tails.KeepTail(ctx, id, 4, tailOf(id, 1, 2), true)
	}
	if n, err := tails.Count(ctx, "acme", "alice"); err != nil || n != 2 {
		t.Fatalf("Count = %d, %v; want alice's 2 tails", n, err)
	}
	if err := tails.Forget(ctx, "acme", "alice", 10); err != nil {
		t.Fatal(err)
	}
	keys, err := tails.rdb.Keys(ctx, globEscape(tails.prefix)+"*alice*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k != tails.erasedKey("acme", "alice") {
			t.Fatalf("key %s survived Forget", k)
		}
	}
	tails.KeepTail(ctx, a1, 9, tailOf(a1, 1, 2), true) // read before the erasure
	if _, _, ok := tails.Tail(ctx, a1, 9); ok {
		t.Fatal("a tail read before the erasure was kept after it")
	}
	if n, err := tails.Count(ctx, "acme", "alice"); err != nil || n != 0 {
		t.Fatalf("Count after Forget = %d, %v; want 0", n, err)
	}
	if _, _, ok := tails.Tail(ctx, bob, 4); !ok {
		t.Fatal("Forget of alice dropped bob's tail")
	}

	fresh := tailOf(a1, 5, 1)
	tails.KeepTail(ctx, a1, 10, fresh, true) // read after it
	if msgs, _, ok := tails.Tail(ctx, a1, 10); !ok || !reflect.DeepEqual(msgs, fresh) {
		t.Fatalf("a tail read after the erasure: %+v, %v; want it kept", msgs, ok)
	}
	if err := tails.Forget(ctx, "acme", "alice", 7); err != nil { // a late, earlier record
		t.Fatal(err)
	}
	if _, _, ok := tails.Tail(ctx, a1, 10); ok {
		t.Fatal("a tail survived Forget")
	}
	tails.KeepTail(ctx, a1, 9, tailOf(a1, 1, 2), true)
	if _, _, ok := tails.Tail(ctx, a1, 9); ok {
		t.Fatal("an earlier record of a change let a tail read before the later one be kept")
	}
}

// TestTailsWithRedisDown: every lookup misses and nothing is kept, with a
// warning that names no message content; Forget fails with
// memory.ErrUnavailable, since kept tails may survive.
func TestTailsWithRedisDown(t *testing.T) {
	ctx := context.Background()
	rdb, err := NewClient("redis://" + closedPort(t) + "/0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	logs := &syncBuffer{}
	tails := NewTails(rdb, slog.New(slog.NewTextHandler(logs, nil)), "down:", time.Minute)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	tails.KeepTail(ctx, id, 1, tailOf(id, 1, 2), true)
	if _, _, ok := tails.Tail(ctx, id, 1); ok {
		t.Fatal("Tail hit with Redis down")
	}
	if err := tails.Forget(ctx, "acme", "alice", 2); !errors.Is(err, memory.ErrUnavailable) {
		t.Fatalf("Forget = %v, want memory.ErrUnavailable", err)
	}
	out := logs.String()
	if strings.Count(out, "level=WARN") < 2 {
		t.Fatalf("want a warning for the keep and the lookup:\n%s", out)
	}
	if strings.Contains(out, "m1") || strings.Contains(out, "m2") {
		t.Fatalf("log contains message content:\n%s", out)
	}
}

// counted returns c's count.
func counted(tb testing.TB, c prometheus.Counter) float64 {
	tb.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		tb.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
