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

// TestChatHolds: each hold gets a fence of its own, never zero; a fence
// names its holder for the keys it holds only, and nothing once removed,
// even while another hold of the same keys is recorded.
func TestChatHolds(t *testing.T) {
	var h contract.ChatHolds[int64, string]
	first := h.Add([]int64{1, 2}, "a")
	second := h.Add([]int64{1}, "b")
	if first == 0 || second == 0 || first == second {
		t.Fatalf("fences %d and %d, want two distinct, not zero", first, second)
	}
	for _, tt := range []struct {
		fence memory.Fence
		key   int64
		want  string
		ok    bool
	}{
		{first, 1, "a", true},
		{first, 2, "a", true},
		{second, 1, "b", true},
		{second, 2, "", false}, // not a key of its hold
		{first, 3, "", false},
		{0, 1, "", false},
	} {
		if got, ok := h.Holder(tt.fence, tt.key); got != tt.want || ok != tt.ok {
			t.Errorf("Holder(%d, %d) = %q, %v; want %q, %v", tt.fence, tt.key, got, ok, tt.want, tt.ok)
		}
	}
	h.Remove(first)
	if got, ok := h.Holder(first, 1); ok {
		t.Errorf("Holder of a removed hold = %q, want none", got)
	}
	if got := h.Holders(1); !slices.Equal(got, []string{"b"}) {
		t.Errorf("Holders(1) = %q, want [b]", got)
	}
	if third := h.Add([]int64{1, 2}, "a"); third == first {
		t.Errorf("a new hold got the removed hold's fence %d again", third)
	}
}
