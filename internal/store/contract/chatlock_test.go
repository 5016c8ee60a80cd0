package contract_test

import (
	"slices"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// TestChatKeys: a chat's key is the same for every holder, chats given
// twice or in another order lock the same keys, in ascending order, and
// chats that differ in any part — also when their ids run together
// ("a"+"bc", "ab"+"c") — get keys of their own.
func TestChatKeys(t *testing.T) {
	id := func(tenant, user, conv string) memory.Identity {
		return memory.Identity{Tenant: tenant, User: user, Conversation: conv}
	}
	x, y := id("t", "ana", "chat-x"), id("t", "ana", "chat-y")
	if got, want := contract.ChatKeys([]memory.Identity{y, x, y}), contract.ChatKeys([]memory.Identity{x, y}); !slices.Equal(got, want) || len(got) != 2 || !slices.IsSorted(got) {
		t.Fatalf("keys %v and %v, want the same two, ascending", got, want)
	}
	distinct := []memory.Identity{x, y, id("u", "ana", "chat-x"), id("t", "bob", "chat-x"), id("a", "bc", "d"), id("ab", "c", "d"), id("a", "b", "cd")}
	if keys := contract.ChatKeys(distinct); len(keys) != len(distinct) {
		t.Fatalf("%d keys for %d distinct chats", len(keys), len(distinct))
	}
	if keys := contract.ChatKeys(nil); len(keys) != 0 {
		t.Fatalf("keys %v for no chat", keys)
	}
}
