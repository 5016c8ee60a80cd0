package sqlite

import (
	"context"
	"strings"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// itemChecks reads, in AddItems' transaction, what contract.ItemChecks
// needs to place items (contract.ReadItemChecks).
func itemChecks(ctx context.Context, tx writeTx, items []memory.Item) (contract.ItemChecks, error) {
	var key, conv string
	each := func(query string, args []any, fn func()) error {
		return eachRow(ctx, tx, query, args, []any{&key, &conv}, func() error { fn(); return nil })
	}
	return contract.ReadItemChecks(items, contract.ItemCheckSQL{
		Erased: func(u contract.User, since time.Time) (bool, error) {
			return refused(ctx, tx, u.Tenant, u.User, since)
		},
		Deleted: func(id memory.Identity, since time.Time) (bool, error) {
			return conversationDeleted(ctx, tx, id, since)
		},
		Superseded: func(id memory.Identity, keys []string, fn func(string)) error {
			return each(`SELECT key, '' FROM messages WHERE tenant = ? AND user_id = ? AND conversation = ?
				AND superseded_at IS NOT NULL AND key IN (`+list("?", len(keys))+`)`, keyArgs(keys, id.Tenant, id.User, id.Conversation),
				func() { fn(key) })
		},
		Present: func(id memory.Identity, keys []string, fn func(string)) error {
			return each(`SELECT key, '' FROM messages WHERE tenant = ? AND user_id = ? AND conversation = ?
				AND key IN (`+list("?", len(keys))+`)`, keyArgs(keys, id.Tenant, id.User, id.Conversation),
				func() { fn(key) })
		},
		Live: func(id memory.Identity, keys []string, fn func(key, conv string)) error {
			return each(`SELECT key, MIN(conversation) FROM messages WHERE tenant = ? AND user_id = ?
				AND superseded_at IS NULL AND key IN (`+list("?", len(keys))+`) GROUP BY key`, keyArgs(keys, id.Tenant, id.User),
				func() { fn(key, conv) })
		},
	})
}

// list is s n times, comma-separated: list("?", 3) is "?, ?, ?", n query
// parameters.
func list(s string, n int) string { return strings.Repeat(s+", ", n-1) + s }

// keyArgs returns args followed by keys.
func keyArgs(keys []string, args ...any) []any {
	for _, k := range keys {
		args = append(args, k)
	}
	return args
}
