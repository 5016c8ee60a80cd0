package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// The index backlog (migration 0027) by the contract (storetest.Knowledge):
// its rows go with their messages and follow them (the foreign key's
// cascades), so an erasure, a deleted conversation and an adoption need
// no statement of their own.

// backlogRows is the most entries one background transaction of
// DeferIndex or ResolveIndex writes: a few milliseconds of the writer.
const backlogRows = 256

// DeferIndex records the entries of live messages, in background
// transactions, leaving out a user erased since the entry's guard.
func (s *Store) DeferIndex(ctx context.Context, entries []memory.PendingIndex) error {
	err := contract.Chunks(entries, backlogRows, func(chunk []memory.PendingIndex) error {
		return s.inWriteAs(ctx, true, func(tx *sql.Tx) error {
			exact, err := tx.PrepareContext(ctx, deferIndexSQL+`conversation = ?3`+deferIndexUpsert)
			if err != nil {
				return err
			}
			defer exact.Close()
			erased := map[contract.User]bool{}
			for _, p := range chunk {
				u := contract.User{Tenant: p.Tenant, User: p.User}
				gone, checked := erased[u]
				if !checked {
					if gone, err = refused(ctx, tx, p.Tenant, p.User, p.GuardSince); err != nil {
						return err
					}
					erased[u] = gone
				}
				if gone {
					continue
				}
				args := []any{p.Tenant, p.User, p.Conversation, p.Key, p.Chunk, p.Bytes, p.Offset}
				r, err := exact.ExecContext(ctx, args...)
				if err != nil {
					return fmt.Errorf("record message %s: %w", p.Key, err)
				}
				if n, err := r.RowsAffected(); err != nil || n > 0 || p.Conversation != memory.DefaultConversation {
					if err != nil {
						return err
					}
					continue
				}
				// Moved out of the default conversation (Adopt) since it
				// was read: where it lives now.
				if _, err := tx.ExecContext(ctx, deferIndexSQL+`?3 = 'default' ORDER BY conversation LIMIT 1`+deferIndexUpsert, args...); err != nil {
					return fmt.Errorf("record message %s: %w", p.Key, err)
				}
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("defer index: %w", err)
	}
	return nil
}

// deferIndexSQL, a condition on the message and deferIndexUpsert record
// an entry (?1 tenant, ?2 user, ?3 conversation, ?4 key, ?5 chunk, ?6
// bytes, ?7 offset) of a live message: a recorded one's chunk rises, its
// offset with it.
const (
	deferIndexSQL = `INSERT INTO index_backlog (tenant, user_id, conversation, key, chunk, byte_offset, bytes)
		SELECT tenant, user_id, conversation, key, ?5, ?7, ?6 FROM messages
		WHERE tenant = ?1 AND user_id = ?2 AND key = ?4 AND superseded_at IS NULL AND `
	deferIndexUpsert = ` ON CONFLICT (tenant, user_id, conversation, key) DO UPDATE SET chunk = MAX(chunk, excluded.chunk),
		byte_offset = CASE WHEN excluded.chunk > chunk THEN excluded.byte_offset ELSE byte_offset END`
)

// PendingIndex reads the oldest entries with their messages by the
// contract: the first limit rows, cut where their bytes pass maxBytes. The
// message of a user whose erasure is under way reads as gone: its text is
// not sent to be embedded.
func (s *Store) PendingIndex(ctx context.Context, limit, maxBytes int) ([]memory.PendingIndex, error) {
	out, err := queryAll(ctx, s.read, func(r rowScanner) (memory.PendingIndex, error) {
		var p memory.PendingIndex
		err := r.Scan(&p.ID, &p.Tenant, &p.User, &p.Conversation, &p.Key, &p.Chunk, &p.Offset, &p.Bytes,
			&p.Message.Role, &p.Message.Content, (*nanoTime)(&p.Message.CreatedAt), &p.Gone)
		p.Message.Tenant, p.Message.User, p.Message.Conversation, p.Message.Key = p.Tenant, p.User, p.Conversation, p.Key
		return p, err
	}, `SELECT b.id, b.tenant, b.user_id, b.conversation, b.key, b.chunk, b.byte_offset, b.bytes,
			COALESCE(m.role, ''), COALESCE(m.content, ''), COALESCE(m.created_at, 0), m.id IS NULL OR m.superseded_at IS NOT NULL
		FROM (SELECT *, SUM(bytes) OVER (ORDER BY id) AS upto
			FROM (SELECT * FROM index_backlog ORDER BY id LIMIT ?1)) b
		LEFT JOIN messages m ON m.tenant = b.tenant AND m.user_id = b.user_id AND m.conversation = b.conversation AND m.key = b.key`+
		notErasing("m")+`
		WHERE b.upto <= ?2 OR b.upto = b.bytes
		ORDER BY b.id`, limit, maxBytes)
	if err != nil {
		return nil, fmt.Errorf("pending index: %w", err)
	}
	return out, nil
}

// ResolveIndex moves entries on, or removes those done, by the contract,
// in background transactions.
func (s *Store) ResolveIndex(ctx context.Context, entries []memory.PendingIndex) error {
	err := contract.Chunks(entries, backlogRows, func(chunk []memory.PendingIndex) error {
		return s.inWriteAs(ctx, true, func(tx *sql.Tx) error {
			for _, p := range chunk {
				query, args := `UPDATE index_backlog SET chunk = ?2, byte_offset = ?3 WHERE id = ?1 AND chunk < ?2`, []any{p.ID, p.Chunk, p.Offset}
				if p.Done {
					query, args = `DELETE FROM index_backlog WHERE id = ?1`, args[:1]
				}
				if _, err := tx.ExecContext(ctx, query, args...); err != nil {
					return fmt.Errorf("entry %d: %w", p.ID, err)
				}
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("resolve index: %w", err)
	}
	return nil
}
