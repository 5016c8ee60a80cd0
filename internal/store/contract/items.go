package contract

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// User names a (tenant, user).
type User struct{ Tenant, User string }

// Source is the message a message item indexes: its conversation and key.
type Source struct {
	memory.Identity
	Key string
}

// ItemChecks are what a store reads, in AddItems' transaction, for KeptItems
// to decide which items are written. A store fills each map for the keys
// its lister names (ItemGuards, GuardedConversations, SupersededChecks,
// MovedChecks).
type ItemChecks struct {
	// Erased holds the users erased since the guard of their items.
	Erased map[User]bool
	// Deleted holds the guarded conversations deleted since.
	Deleted map[memory.Identity]bool
	// Superseded holds the sources no longer on their conversation's live
	// branch.
	Superseded map[Source]bool
	// Moved maps a source of the default conversation that moved out of it
	// (see Adopt) to the conversation that holds it now.
	Moved map[Source]string
}

// ItemGuards returns the guard of each user's items, the earliest
// GuardSince among them, for the users with a guarded item, in a fixed
// order (so stores lock them in that order).
func ItemGuards(items []memory.Item) ([]User, map[User]time.Time) {
	guards := map[User]time.Time{}
	for _, it := range items {
		u := User{it.Tenant, it.User}
		if g, ok := guards[u]; !it.GuardSince.IsZero() && (!ok || it.GuardSince.Before(g)) {
			guards[u] = it.GuardSince
		}
	}
	users := make([]User, 0, len(guards))
	for u := range guards {
		users = append(users, u)
	}
	slices.SortFunc(users, func(a, b User) int {
		return cmp.Or(strings.Compare(a.Tenant, b.Tenant), strings.Compare(a.User, b.User))
	})
	return users, guards
}

// GuardedConversations lists the conversations whose deletion refuses items
// (ItemChecks.Deleted): those of the items of users with a guard (see
// ItemGuards), but the default conversation, which Adopt removes when it
// moves its turns elsewhere.
func GuardedConversations(items []memory.Item, guards map[User]time.Time) []memory.Identity {
	var ids []memory.Identity
	for _, it := range items {
		id := memory.Identity{Tenant: it.Tenant, User: it.User, Conversation: it.Conversation}
		if _, guarded := guards[User{it.Tenant, it.User}]; guarded && id.Conversation != "" && id.Conversation != memory.DefaultConversation &&
			!slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// SupersededChecks lists the sources of items' message items: a late index
// of a message its conversation has since replaced (edited or regenerated)
// must not make it recallable again.
func SupersededChecks(items []memory.Item) []Source {
	return sources(items, func(it memory.Item) bool { return it.Conversation != "" })
}

// MovedChecks lists the sources of items' message items of the default
// conversation: an exchange indexed after its chat moved it elsewhere (see
// Adopt) is indexed where it lives.
func MovedChecks(items []memory.Item) []Source {
	return sources(items, func(it memory.Item) bool { return it.Conversation == memory.DefaultConversation })
}

func sources(items []memory.Item, keep func(memory.Item) bool) []Source {
	var out []Source
	for _, it := range items {
		if it.Kind == "message" && keep(it) {
			out = append(out, SourceOf(it))
		}
	}
	return out
}

// SourceOf is the source of a message item.
func SourceOf(it memory.Item) Source {
	return Source{memory.Identity{Tenant: it.Tenant, User: it.User, Conversation: it.Conversation}, it.Ref}
}

// Refused reports whether AddItems leaves it out: its user was erased, or
// its conversation deleted, since it was captured.
func (c ItemChecks) Refused(it memory.Item) bool {
	return c.Erased[User{it.Tenant, it.User}] ||
		c.Deleted[memory.Identity{Tenant: it.Tenant, User: it.User, Conversation: it.Conversation}]
}

// Place decides where AddItems writes it: ok is false when it is left out
// (Refused, or a message item of a superseded message); else it is it, in
// the conversation its message moved to when it moved.
func (c ItemChecks) Place(it memory.Item) (memory.Item, bool) {
	if c.Refused(it) || it.Kind == "message" && c.Superseded[SourceOf(it)] {
		return it, false
	}
	if to, ok := c.Moved[SourceOf(it)]; ok && it.Kind == "message" {
		it.Conversation = to
	}
	return it, true
}
