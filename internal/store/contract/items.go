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

// ItemChecks are what a store reads, in AddItems' transaction, for Place
// to decide which items are written. A store fills each map for the keys
// its lister names (ItemGuards, GuardedConversations, SupersededChecks with
// NotLive, DerivedChecks, MovedChecks).
//
// A guarded item (a hook's, written late) is written only while what it
// was made from is stored as it was read: its message live in its
// conversation, its summary or fact unchanged. So a late index of a
// deleted conversation writes nothing back, even once a conversation of
// the same name (the default one too) started again, however the
// exchanges of either are dated.
type ItemChecks struct {
	// Erased holds the users erased since the guard of their items.
	Erased map[User]bool
	// Deleted holds the guarded conversations deleted since.
	Deleted map[memory.Identity]bool
	// Superseded holds the sources no longer live in their conversation
	// (NotLive): superseded there, or, of a guarded user's items, not
	// stored there at all (deleted with it, or moved: see Moved).
	Superseded map[Source]bool
	// Stale holds, by DerivedOf, the guarded summary and fact items whose
	// summary or fact is no longer stored as it was read (DerivedChecks).
	Stale map[Source]bool
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

// NotLive returns the sources of items' message items (SupersededChecks)
// not live in their conversation, given stored, the sources it holds (true:
// superseded there): the superseded ones, and those of guarded users (see
// ItemGuards) not stored.
func NotLive(items []memory.Item, guards map[User]time.Time, stored map[Source]bool) map[Source]bool {
	out := map[Source]bool{}
	for _, it := range items {
		src := SourceOf(it)
		superseded, ok := stored[src]
		if _, guarded := guards[User{it.Tenant, it.User}]; it.Kind == "message" && it.Conversation != "" && (superseded || !ok && guarded) {
			out[src] = true
		}
	}
	return out
}

// DerivedChecks lists the summary and fact items of guarded users (see
// ItemGuards), one per DerivedOf: each is written only while its summary
// (the conversation's version of Ref "conversation:vN", created at the
// item's CreatedAt) or its fact (current, of id Ref, last stated in the
// item's conversation at the item's CreatedAt) is stored so, as the
// indexer read it.
func DerivedChecks(items []memory.Item, guards map[User]time.Time) []memory.Item {
	var out []memory.Item
	seen := map[Source]bool{}
	for _, it := range items {
		if _, guarded := guards[User{it.Tenant, it.User}]; guarded && it.Kind != "message" && !seen[DerivedOf(it)] {
			seen[DerivedOf(it)] = true
			out = append(out, it)
		}
	}
	return out
}

// DerivedOf names the summary or fact an item was made from: its
// conversation, kind and ref.
func DerivedOf(it memory.Item) Source {
	return Source{memory.Identity{Tenant: it.Tenant, User: it.User, Conversation: it.Conversation}, it.Kind + ":" + it.Ref}
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
// its conversation deleted, since it was captured, or it is Stale.
func (c ItemChecks) Refused(it memory.Item) bool {
	return c.Erased[User{it.Tenant, it.User}] ||
		c.Deleted[memory.Identity{Tenant: it.Tenant, User: it.User, Conversation: it.Conversation}] ||
		it.Kind != "message" && c.Stale[DerivedOf(it)]
}

// Place decides where AddItems writes it: ok is false when it is left out
// (Refused, or a message item of a message not live where it says and not
// moved); else it is it, in the conversation its message moved to when it
// moved.
func (c ItemChecks) Place(it memory.Item) (memory.Item, bool) {
	if c.Refused(it) {
		return it, false
	}
	if to, ok := c.Moved[SourceOf(it)]; ok && it.Kind == "message" {
		it.Conversation = to
		return it, true
	}
	return it, it.Kind != "message" || !c.Superseded[SourceOf(it)]
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
	// Stored calls fn with each of keys that is a message of id, and
	// whether it is no longer on its live branch.
	Stored func(id memory.Identity, keys []string, fn func(key string, superseded bool)) error
	// Derived calls fn when the summary or fact it was made from is
	// stored as it was read (see DerivedChecks).
	Derived func(it memory.Item, fn func()) error
	// Live calls fn with each of keys that is a live message of a
	// conversation of id's user, and that conversation (the least, when
	// several hold it).
	Live func(id memory.Identity, keys []string, fn func(key, conv string)) error
}

// ReadItemChecks reads through q what ItemChecks needs to place items: a
// query per guarded user, per guarded conversation and per guarded summary
// or fact item, and per conversation a query for every CheckKeys message
// keys (not one per item: a history of tens of thousands of messages is
// indexed in batches).
func ReadItemChecks(items []memory.Item, q ItemCheckSQL) (ItemChecks, error) {
	c := ItemChecks{Erased: map[User]bool{}, Deleted: map[memory.Identity]bool{},
		Stale: map[Source]bool{}, Moved: map[Source]string{}}
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
	for _, it := range DerivedChecks(items, guards) {
		c.Stale[DerivedOf(it)] = true
		if err := q.Derived(it, func() { c.Stale[DerivedOf(it)] = false }); err != nil {
			return c, fmt.Errorf("check item sources: %w", err)
		}
	}
	stored := map[Source]bool{}
	err := keyBatches(SupersededChecks(items), func(id memory.Identity, keys []string) error {
		return q.Stored(id, keys, func(key string, superseded bool) { stored[Source{id, key}] = superseded })
	})
	if err != nil {
		return c, fmt.Errorf("check superseded item sources: %w", err)
	}
	c.Superseded = NotLive(items, guards, stored)
	err = keyBatches(MovedChecks(items), func(id memory.Identity, keys []string) error {
		// Only a message no longer in the default conversation is looked up
		// further (by key alone: no index serves it).
		keys = slices.DeleteFunc(slices.Clone(keys), func(k string) bool { _, here := stored[Source{id, k}]; return here })
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
