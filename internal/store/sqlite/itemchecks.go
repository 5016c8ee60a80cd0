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
	return contract.ReadItemChecks(items, contract.ItemCheckSQL{
		Erased: func(u contract.User, since time.Time) (bool, error) {
			return refused(ctx, tx, u.Tenant, u.User, since)
		},
		Deleted: func(id memory.Identity, since time.Time) (bool, error) {
			return conversationDeleted(ctx, tx, id, since)
		},
		Superseded: func(id memory.Identity, keys []string, fn func(string)) error {
			return textRows(ctx, tx, `SELECT key, '' FROM messages WHERE tenant = ? AND user_id = ? AND conversation = ?
				AND superseded_at IS NOT NULL AND key IN (`+list("?", len(keys))+`)`, keyArgs(keys, id.Tenant, id.User, id.Conversation),
				func(key, _ string) { fn(key) })
		},
		Present: func(id memory.Identity, keys []string, fn func(string)) error {
			return textRows(ctx, tx, `SELECT key, '' FROM messages WHERE tenant = ? AND user_id = ? AND conversation = ?
				AND key IN (`+list("?", len(keys))+`)`, keyArgs(keys, id.Tenant, id.User, id.Conversation),
				func(key, _ string) { fn(key) })
		},
		Live: func(id memory.Identity, keys []string, fn func(key, conv string)) error {
			return textRows(ctx, tx, `SELECT key, MIN(conversation) FROM messages WHERE tenant = ? AND user_id = ?
				AND superseded_at IS NULL AND key IN (`+list("?", len(keys))+`) GROUP BY key`, keyArgs(keys, id.Tenant, id.User), fn)
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
