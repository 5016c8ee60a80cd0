package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// The index backlog (migration 0025) by the contract (storetest.Knowledge):
// its rows go with their messages and follow them (the foreign key's
// cascades), so an erasure, a deleted conversation and an adoption need
// no statement of their own.

// DeferIndex records the entries of live messages in one transaction,
// holding each user's lock shared (an erasure or a conversation's
// deletion, which hold it exclusively, come before or after it whole),
// and leaving out a user erased since the entry's guard.
func (s *Store) DeferIndex(ctx context.Context, entries []memory.PendingIndex) error {
	if len(entries) == 0 {
		return nil
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// Each user's guard: the earliest of their entries' (zero: none).
		guards := map[contract.User]time.Time{}
		for _, p := range entries {
			u := contract.User{Tenant: p.Tenant, User: p.User}
			if g, ok := guards[u]; !ok || !p.GuardSince.IsZero() && (g.IsZero() || p.GuardSince.Before(g)) {
				guards[u] = p.GuardSince
			}
		}
		users := make([]contract.User, 0, len(guards))
		for u := range guards {
			users = append(users, u)
		}
		slices.SortFunc(users, contract.CompareUsers)
		erased := map[contract.User]bool{}
		for _, u := range users {
			var err error
			if guards[u].IsZero() {
				_, err = tx.Exec(ctx, fmt.Sprintf(userLockSQL, "_shared"), u.Tenant, u.User)
				err = unavailable(err)
			} else {
				err = guard(ctx, tx, u.Tenant, u.User, guards[u]) // which takes the lock
			}
			switch {
			case errors.Is(err, memory.ErrErased):
				erased[u] = true
			case err != nil:
				return fmt.Errorf("lock user: %w", err)
			}
		}
		live := slices.DeleteFunc(slices.Clone(entries), func(p memory.PendingIndex) bool {
			return erased[contract.User{Tenant: p.Tenant, User: p.User}]
		})
		recorded, err := deferIndex(ctx, tx, live, `JOIN messages m ON m.tenant = u.tenant AND m.user_id = u.user_id
			AND m.conversation = u.conversation AND m.key = u.key AND m.superseded_at IS NULL`)
		if err != nil {
			return err
		}
		// Those of the default conversation not found there moved out of
		// it (Adopt) since they were read.
		moved := slices.DeleteFunc(live, func(p memory.PendingIndex) bool {
			return p.Conversation != memory.DefaultConversation || recorded[contract.Source{Identity: p.Identity, Key: p.Key}]
		})
		_, err = deferIndex(ctx, tx, moved, `CROSS JOIN LATERAL (SELECT m.tenant, m.user_id, m.conversation, m.key FROM messages m
			WHERE m.tenant = u.tenant AND m.user_id = u.user_id AND m.key = u.key AND m.superseded_at IS NULL
			ORDER BY m.conversation LIMIT 1) m`)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: defer index: %w", err)
	}
	return nil
}

// deferIndex records, in tx and in their order, those of entries whose
// message live joins them (SQL joining u, the entry, to m, its message, at
// most one), and returns the entries' sources it recorded.
func deferIndex(ctx context.Context, tx pgx.Tx, entries []memory.PendingIndex, live string) (map[contract.Source]bool, error) {
	var tenants, users, convs, keys []string
	var chunks, offsets, bytes []int32
	at := map[contract.Source]int{} // each source's place in the arrays
	for _, p := range entries {
		src := contract.Source{Identity: p.Identity, Key: p.Key}
		chunk, offset := int32(min(p.Chunk, 1<<31-1)), int32(min(p.Offset, 1<<31-1))
		if i, ok := at[src]; ok {
			if chunk > chunks[i] {
				chunks[i], offsets[i] = chunk, offset
			}
			continue
		}
		at[src] = len(keys)
		tenants, users, convs, keys = append(tenants, p.Tenant), append(users, p.User), append(convs, p.Conversation), append(keys, p.Key)
		chunks, offsets, bytes = append(chunks, chunk), append(offsets, offset), append(bytes, int32(min(p.Bytes, 1<<31-1)))
	}
	if len(keys) == 0 {
		return nil, nil
	}
	rows, err := tx.Query(ctx, `
		INSERT INTO index_backlog AS b (tenant, user_id, conversation, key, chunk, byte_offset, bytes)
		SELECT m.tenant, m.user_id, m.conversation, m.key, u.chunk, u.byte_offset, u.bytes
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::int[], $7::int[])
			WITH ORDINALITY AS u(tenant, user_id, conversation, key, chunk, bytes, byte_offset, n)
		`+live+`
		ORDER BY u.n
		ON CONFLICT (tenant, user_id, conversation, key) DO UPDATE SET chunk = GREATEST(b.chunk, EXCLUDED.chunk),
			byte_offset = CASE WHEN EXCLUDED.chunk > b.chunk THEN EXCLUDED.byte_offset ELSE b.byte_offset END
		RETURNING b.tenant, b.user_id, b.conversation, b.key`, tenants, users, convs, keys, chunks, bytes, offsets)
	recorded := map[contract.Source]bool{}
	var src contract.Source
	return recorded, eachRow(rows, err, "record messages", []any{&src.Tenant, &src.User, &src.Conversation, &src.Key},
		func() { recorded[src] = true })
}

// PendingIndex reads the oldest entries with their messages by the
// contract: the first limit rows, cut where their bytes pass maxBytes.
func (s *Store) PendingIndex(ctx context.Context, limit, maxBytes int) ([]memory.PendingIndex, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT b.id, b.tenant, b.user_id, b.conversation, b.key, b.chunk, b.byte_offset, b.bytes,
			coalesce(m.role, ''), coalesce(m.content, ''), coalesce(m.created_at, 'epoch'), m.key IS NULL OR m.superseded_at IS NOT NULL
		FROM (SELECT f.*, sum(f.bytes) OVER (ORDER BY f.id) AS upto
			FROM (SELECT * FROM index_backlog ORDER BY id LIMIT $1) f) b
		LEFT JOIN messages m ON m.tenant = b.tenant AND m.user_id = b.user_id AND m.conversation = b.conversation AND m.key = b.key
		WHERE b.upto <= $2 OR b.upto = b.bytes
		ORDER BY b.id`, limit, maxBytes)
	out := []memory.PendingIndex{}
	var p memory.PendingIndex
	err = eachRow(rows, err, "pending index", []any{&p.ID, &p.Tenant, &p.User, &p.Conversation, &p.Key, &p.Chunk, &p.Offset, &p.Bytes,
		&p.Message.Role, &p.Message.Content, &p.Message.CreatedAt, &p.Gone}, func() {
		p.Message.Tenant, p.Message.User, p.Message.Conversation, p.Message.Key = p.Tenant, p.User, p.Conversation, p.Key
		out = append(out, p)
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return out, nil
}

// ResolveIndex moves entries on, or removes those done, by the contract,
// in one transaction.
func (s *Store) ResolveIndex(ctx context.Context, entries []memory.PendingIndex) error {
	var done, ids []int64
	var chunks, offsets []int32
	for _, p := range entries {
		if p.Done {
			done = append(done, p.ID)
		} else {
			ids, chunks = append(ids, p.ID), append(chunks, int32(min(p.Chunk, 1<<31-1)))
			offsets = append(offsets, int32(min(p.Offset, 1<<31-1)))
		}
	}
	if len(done) == 0 && len(ids) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM index_backlog WHERE id = ANY($1)`, done)
	b.Queue(`UPDATE index_backlog b SET chunk = u.chunk, byte_offset = u.byte_offset
		FROM unnest($1::bigint[], $2::int[], $3::int[]) AS u(id, chunk, byte_offset) WHERE b.id = u.id AND u.chunk > b.chunk`,
		ids, chunks, offsets)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("postgres: resolve index: %w", unavailable(err))
	}
	return nil
}
