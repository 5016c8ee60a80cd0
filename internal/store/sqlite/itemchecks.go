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
		Deleted: func(id memory.Identity, _ time.Time) (bool, error) {
			var stored string // lateSQL of no message: the conversation, when it exists
			err := tx.QueryRowContext(ctx, lateSQL, id.Tenant, id.User, id.Conversation, "").Scan(&stored)
			return stored == "", err
		},
		Stored: func(id memory.Identity, keys []string, fn func(string, bool)) error {
			return each(`SELECT key, superseded_at IS NOT NULL FROM messages WHERE tenant = ? AND user_id = ? AND conversation = ?
				AND key IN (`+list("?", len(keys))+`)`, keyArgs(keys, id.Tenant, id.User, id.Conversation),
				func() { fn(key, conv == "1") })
		},
		Derived: func(it memory.Item, fn func()) error {
			return each(`SELECT '', '' WHERE CASE ?4 WHEN 'fact' THEN EXISTS (SELECT 1 FROM facts WHERE id = CAST(?5 AS INTEGER)
					AND tenant = ?1 AND user_id = ?2 AND COALESCE(conversation, '') = ?3 AND superseded_at IS NULL AND updated_at = ?6)
				ELSE EXISTS (SELECT 1 FROM summaries WHERE tenant = ?1 AND user_id = ?2 AND conversation = ?3
					AND ?3 || ':v' || version = ?5 AND created_at = ?6) END`,
				[]any{it.Tenant, it.User, it.Conversation, it.Kind, it.Ref, nanos(it.CreatedAt)}, fn)
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
