package contract

import (
	"cmp"
	"fmt"
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
	slices.SortFunc(users, CompareUsers)
	return users, guards
}

// CompareUsers orders users by tenant, then user: the order in which stores
// lock users' rows, so two writers never deadlock on them.
func CompareUsers(a, b User) int {
	return cmp.Or(strings.Compare(a.Tenant, b.Tenant), strings.Compare(a.User, b.User))
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

// CheckKeys is the most message keys one query of ReadItemChecks names.
const CheckKeys = 500

// ItemCheckSQL is the SQL ReadItemChecks runs through a store, in AddItems'
// transaction.
type ItemCheckSQL struct {
	// Erased reports whether u was erased at or after since.
	Erased func(u User, since time.Time) (bool, error)
	// Deleted reports whether conversation id, guarded since since, was
	// deleted.
	Deleted func(id memory.Identity, since time.Time) (bool, error)
	// Superseded calls fn with each of keys that is a message of id no
	// longer on its live branch.
	Superseded func(id memory.Identity, keys []string, fn func(key string)) error
	// Present calls fn with each of keys that is a message of id.
	Present func(id memory.Identity, keys []string, fn func(key string)) error
	// Live calls fn with each of keys that is a live message of a
	// conversation of id's user, and that conversation (the least, when
	// several hold it).
	Live func(id memory.Identity, keys []string, fn func(key, conv string)) error
}

// ReadItemChecks reads through q what ItemChecks needs to place items: a
// query per guarded user and per guarded conversation, and per
// conversation a query for every CheckKeys message keys (not one per item:
// a history of tens of thousands of messages is indexed in batches).
func ReadItemChecks(items []memory.Item, q ItemCheckSQL) (ItemChecks, error) {
	c := ItemChecks{Erased: map[User]bool{}, Deleted: map[memory.Identity]bool{},
		Superseded: map[Source]bool{}, Moved: map[Source]string{}}
	users, guards := ItemGuards(items)
	for _, u := range users {
		gone, err := q.Erased(u, guards[u])
		if err != nil {
			return c, err
		}
		c.Erased[u] = gone
	}
	for _, id := range GuardedConversations(items, guards) {
		deleted, err := q.Deleted(id, guards[User{Tenant: id.Tenant, User: id.User}])
		if err != nil {
			return c, err
		}
		c.Deleted[id] = deleted
	}
	err := keyBatches(SupersededChecks(items), func(id memory.Identity, keys []string) error {
		return q.Superseded(id, keys, func(key string) { c.Superseded[Source{id, key}] = true })
	})
	if err != nil {
		return c, fmt.Errorf("check superseded item sources: %w", err)
	}
	err = keyBatches(MovedChecks(items), func(id memory.Identity, keys []string) error {
		// Only a message no longer in the default conversation is looked up
		// further (by key alone: no index serves it).
		here := map[string]bool{}
		if err := q.Present(id, keys, func(key string) { here[key] = true }); err != nil {
			return err
		}
		keys = slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return here[k] })
		if len(keys) == 0 {
			return nil
		}
		return q.Live(id, keys, func(key, conv string) { c.Moved[Source{id, key}] = conv })
	})
	if err != nil {
		return c, fmt.Errorf("check moved item sources: %w", err)
	}
	return c, nil
}

// keyBatches calls fn for each conversation of srcs with its distinct keys,
// CheckKeys at a time.
func keyBatches(srcs []Source, fn func(id memory.Identity, keys []string) error) error {
	var ids []memory.Identity
	keys := map[memory.Identity][]string{}
	seen := map[Source]bool{}
	for _, src := range srcs {
		if seen[src] {
			continue
		}
		seen[src] = true
		if _, ok := keys[src.Identity]; !ok {
			ids = append(ids, src.Identity)
		}
		keys[src.Identity] = append(keys[src.Identity], src.Key)
	}
	for _, id := range ids {
		if err := Chunks(keys[id], CheckKeys, func(ks []string) error { return fn(id, ks) }); err != nil {
			return err
		}
	}
	return nil
}

// Chunks calls fn with xs in order, n at a time (the last chunk shorter).
func Chunks[T any](xs []T, n int, fn func(chunk []T) error) error {
	for len(xs) > 0 {
		k := min(len(xs), n)
		if err := fn(xs[:k]); err != nil {
			return err
		}
		xs = xs[k:]
	}
	return nil
}

// RowBatches calls fn with xs in order, n at a time while n remain, then
// one at a time: a store writes them with two statements, one of n rows
// and one of a row, each prepared once.
func RowBatches[T any](xs []T, n int, fn func(batch []T) error) error {
	for len(xs) > 0 {
		k := n
		if len(xs) < n {
			k = 1
		}
		if err := fn(xs[:k]); err != nil {
			return err
		}
		xs = xs[k:]
	}
	return nil
}
