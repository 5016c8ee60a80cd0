package redis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestCachedErasureLeavesNothingInRedis: after DeleteUser returns, no key
// of the erased user is left in Redis but the record of the erasure; a
// conversation read from the store just before the erasure and kept just
// after it is refused, while a fresh conversation after it is kept as
// usual. Deleting a conversation drops every tail of its user, and
// neither touches another user's.
func TestCachedErasureLeavesNothingInRedis(t *testing.T) {
	ctx := context.Background()
	c := contractCache(t)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	other := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c2"}
	bob := memory.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}
	// read reads id's newest turns as a request does: the revision first.
	read := func(id memory.Identity) (int64, []memory.Message) {
		t.Helper()
		rev, err := c.ItemRevisions(ctx, id.Tenant, id.User)
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := c.Recent(ctx, id, 10)
		if err != nil {
			t.Fatal(err)
		}
		return rev.Tail(), msgs
	}
	save := func(x memory.Identity, exID, text string) {
		t.Helper()
		ex := memory.Exchange{ID: exID, Identity: x, At: time.Now(),
			Turn:  []memory.Message{{Role: "user", Content: text}},
			Reply: memory.Message{Role: "assistant", Content: "Noted"}}
		if res, err := c.SaveExchange(ctx, ex); err != nil || res.Dropped {
			t.Fatalf("SaveExchange = %+v, %v", res, err)
		}
	}
	for _, x := range []memory.Identity{id, other, bob} {
		save(x, x.User+x.Conversation, "I live in Porto and I am vegan")
		rev, msgs := read(x)
		c.Tails.KeepTail(ctx, x, rev, msgs, true)
	}
	if err := c.DeleteConversation(ctx, other); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Tails.Count(ctx, "acme", "alice"); err != nil || n != 0 {
		t.Fatalf("%d tails of the user survived DeleteConversation (%v)", n, err)
	}
	rev, stale := read(id) // read before the erasure ...
	if len(stale) != 2 {
		t.Fatalf("Recent = %d messages, want 2", len(stale))
	}
	c.Tails.KeepTail(ctx, id, rev, stale, true)
	if err := c.DeleteUser(ctx, id.Tenant, id.User); err != nil {
		t.Fatal(err)
	}
	c.Tails.KeepTail(ctx, id, rev, stale, true) // ... kept after it
	keys, err := c.Tails.rdb.Keys(ctx, globEscape(c.Tails.prefix)+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if strings.Contains(k, "alice") && k != c.Tails.erasedKey("acme", "alice") {
			t.Fatalf("key %s of the erased user is left in Redis", k)
		}
	}
	if rev, msgs := read(id); len(msgs) != 0 {
		t.Fatalf("Recent after the erasure = %d messages", len(msgs))
	} else if keptAt(c.Tails, id, rev) {
		t.Fatal("a tail is served after the erasure")
	}
	if bobRev, _ := read(bob); !keptAt(c.Tails, bob, bobRev) {
		t.Fatal("alice's erasure dropped bob's tail")
	}

	// A fresh start is kept as usual.
	save(id, "fresh", "I moved to Braga")
	rev, fresh := read(id)
	c.Tails.KeepTail(ctx, id, rev, fresh, true)
	if msgs, _, ok := c.Tails.Tail(ctx, id, rev); !ok || len(msgs) != 2 || msgs[0].Content != "I moved to Braga" {
		t.Fatalf("Tail after a fresh start = %+v, %v", msgs, ok)
	}
}

// keptAt reports whether tails serve a tail of id at rev.
func keptAt(tails *Tails, id memory.Identity, rev int64) bool {
	_, _, ok := tails.Tail(context.Background(), id, rev)
	return ok
}
