package redis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestCachedErasureLeavesNothingInRedis: after DeleteUser returns, no key
// of the erased user is left in Redis but the erasure's record, and the
// race where a request read a conversation from the store just before the
// erasure and keeps it just after is refused. Deleting a conversation
// drops every tail of its user.
func TestCachedErasureLeavesNothingInRedis(t *testing.T) {
	ctx := context.Background()
	c := contractCache(t)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	other := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c2"}
	bob := memory.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}
	for _, x := range []memory.Identity{id, other, bob} {
		ex := memory.Exchange{ID: x.User + x.Conversation, Identity: x, At: time.Now().Add(-time.Second),
			Turn:  []memory.Message{{Role: "user", Content: "I live in Porto and I am vegan"}},
			Reply: memory.Message{Role: "assistant", Content: "Noted"}}
		if _, err := c.SaveExchange(ctx, ex); err != nil {
			t.Fatal(err)
		}
		msgs, err := c.Recent(ctx, x, 10)
		if err != nil || len(msgs) != 2 {
			t.Fatalf("Recent = %d, %v", len(msgs), err)
		}
		c.Tails.KeepTail(ctx, x, 2, msgs, true)
	}
	if err := c.DeleteConversation(ctx, other); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := c.Tails.Tail(ctx, id, 2); ok {
		t.Fatal("a tail of the user survived DeleteConversation")
	}
	stale, err := c.Recent(ctx, id, 10) // read before the erasure ...
	if err != nil || len(stale) != 2 {
		t.Fatalf("Recent = %d, %v", len(stale), err)
	}
	c.Tails.KeepTail(ctx, id, 3, stale, true)
	if err := c.DeleteUser(ctx, id.Tenant, id.User); err != nil {
		t.Fatal(err)
	}
	c.Tails.KeepTail(ctx, id, 3, stale, true) // ... kept after it
	keys, err := c.Tails.rdb.Keys(ctx, globEscape(c.Tails.prefix)+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if strings.Contains(k, "alice") && k != c.Tails.erasedKey("acme", "alice") {
			t.Fatalf("key %s of the erased user is left in Redis", k)
		}
	}
	if msgs, err := c.Recent(ctx, id, 10); err != nil || len(msgs) != 0 {
		t.Fatalf("Recent after the erasure = %d messages, %v", len(msgs), err)
	}
	if _, _, ok := c.Tails.Tail(ctx, bob, 2); !ok {
		t.Fatal("erasing alice dropped bob's tail")
	}
}
