package sqlite

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// checkKeys is the most message keys one query of itemChecks names.
const checkKeys = 500

// itemChecks reads, in AddItems' transaction, what contract.ItemChecks
// needs to place items: a query per user and per guarded conversation, and
// per conversation a query for every checkKeys message keys (not one per
// item: a history of tens of thousands of messages is indexed in batches).
func itemChecks(ctx context.Context, tx writeTx, items []memory.Item) (contract.ItemChecks, error) {
	c := contract.ItemChecks{Erased: map[contract.User]bool{}, Deleted: map[memory.Identity]bool{},
		Superseded: map[contract.Source]bool{}, Moved: map[contract.Source]string{}}
	users, guards := contract.ItemGuards(items)
	for _, u := range users {
		gone, err := refused(ctx, tx, u.Tenant, u.User, guards[u])
		if err != nil {
			return c, err
		}
		c.Erased[u] = gone
	}
	for _, id := range contract.GuardedConversations(items, guards) {
		deleted, err := conversationDeleted(ctx, tx, id, guards[contract.User{Tenant: id.Tenant, User: id.User}])
		if err != nil {
			return c, err
		}
		c.Deleted[id] = deleted
	}
	err := eachKeys(contract.SupersededChecks(items), func(id memory.Identity, keys []string) error {
		return textRows(ctx, tx, `SELECT key, '' FROM messages WHERE tenant = ? AND user_id = ? AND conversation = ?
			AND superseded_at IS NOT NULL AND key IN (`+params(len(keys))+`)`, keyArgs(keys, id.Tenant, id.User, id.Conversation),
			func(key, _ string) { c.Superseded[contract.Source{Identity: id, Key: key}] = true })
	})
	if err != nil {
		return c, fmt.Errorf("check superseded item sources: %w", err)
	}
	err = eachKeys(contract.MovedChecks(items), func(id memory.Identity, keys []string) error {
		// Only a message no longer in the default conversation is looked up
		// further (by key alone: no index serves it).
		here := map[string]bool{}
		if err := textRows(ctx, tx, `SELECT key, '' FROM messages WHERE tenant = ? AND user_id = ? AND conversation = ?
			AND key IN (`+params(len(keys))+`)`, keyArgs(keys, id.Tenant, id.User, id.Conversation),
			func(key, _ string) { here[key] = true }); err != nil {
			return err
		}
		keys = slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return here[k] })
		if len(keys) == 0 {
			return nil
		}
		return textRows(ctx, tx, `SELECT key, MIN(conversation) FROM messages WHERE tenant = ? AND user_id = ?
			AND superseded_at IS NULL AND key IN (`+params(len(keys))+`) GROUP BY key`, keyArgs(keys, id.Tenant, id.User),
			func(key, conv string) { c.Moved[contract.Source{Identity: id, Key: key}] = conv })
	})
	if err != nil {
		return c, fmt.Errorf("check moved item sources: %w", err)
	}
	return c, nil
}

// eachKeys calls fn for each conversation of srcs with its distinct keys,
// checkKeys at a time.
func eachKeys(srcs []contract.Source, fn func(id memory.Identity, keys []string) error) error {
	var ids []memory.Identity
	keys := map[memory.Identity][]string{}
	seen := map[contract.Source]bool{}
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
		for ks := keys[id]; len(ks) > 0; {
			n := min(len(ks), checkKeys)
			if err := fn(id, ks[:n]); err != nil {
				return err
			}
			ks = ks[n:]
		}
	}
	return nil
}

// params is a list of n query parameters: "?, ?, ?".
func params(n int) string { return strings.Repeat("?, ", n-1) + "?" }

// keyArgs returns args followed by keys.
func keyArgs(keys []string, args ...any) []any {
	for _, k := range keys {
		args = append(args, k)
	}
	return args
}

// textRows runs query, which reads two text columns, in tx and calls fn
// with each row's.
func textRows(ctx context.Context, tx writeTx, query string, args []any, fn func(a, b string)) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var a, b string
		if err := rows.Scan(&a, &b); err != nil {
			return err
		}
		fn(a, b)
	}
	return rows.Err()
}
