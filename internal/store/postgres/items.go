package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// itemColumns are the columns scanItem reads, in order.
const itemColumns = `id, tenant, user_id, coalesce(conversation, ''), kind, source, chunk, content,
	coalesce(model, ''), coalesce(dims, 0), created_at, coalesce(said_at, created_at)`

// scanItem reads one row of itemColumns followed by extra destinations.
func scanItem(row pgx.Row, extra ...any) (memory.Item, error) {
	var it memory.Item
	dest := append([]any{&it.ID, &it.Tenant, &it.User, &it.Conversation, &it.Kind, &it.Ref, &it.Chunk,
		&it.Text, &it.Model, &it.Dims, &it.CreatedAt, &it.SaidAt}, extra...)
	return it, row.Scan(dest...) // times in UTC: see Open's AfterConnect
}

// scanItemVector reads one row of itemColumns, extra and the embedding
// (NULL: none).
func scanItemVector(row pgx.Row, extra ...any) (memory.Item, error) {
	var vec *pgvector.Vector
	it, err := scanItem(row, append(extra, &vec)...)
	if vec != nil {
		it.Embedding = vec.Slice()
	}
	return it, err
}

// vectorArg returns the embedding as a query argument: NULL when absent.
func vectorArg(v []float32) *pgvector.Vector {
	if len(v) == 0 {
		return nil
	}
	vec := pgvector.NewVector(v)
	return &vec
}

// AddItems stores recallable items in one transaction by the contract
// (storetest.Knowledge; contract.ItemChecks). An existing item is left
// untouched when nothing changed (no new row version, no HNSW insertion).
func (s *Store) AddItems(ctx context.Context, items []memory.Item) error {
	if len(items) == 0 {
		return nil
	}
	if err := contract.ValidItem(items...); err != nil {
		return fmt.Errorf("postgres: add items: %w", err)
	}
	now := time.Now()
	// An item's arguments (upsertItemSQL's).
	args := func(it memory.Item) []any {
		var dimsArg, modelArg any
		if len(it.Embedding) > 0 {
			dimsArg, modelArg = len(it.Embedding), it.Model
		}
		at, said := contract.ItemTimes(it, now)
		return []any{it.Tenant, it.User, nullString(it.Conversation), it.Kind, it.Ref, it.Chunk, it.Text,
			vectorArg(it.Embedding), dimsArg, modelArg, at, said}
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		users, guards := contract.ItemGuards(items)
		// Each guarded user's guard, in a fixed order; those erased since
		// are refused.
		checks := contract.ItemChecks{Erased: map[contract.User]bool{}}
		for _, u := range users {
			switch err := guard(ctx, tx, u.Tenant, u.User, guards[u]); {
			case errors.Is(err, memory.ErrErased):
				checks.Erased[u] = true
			case err != nil:
				return err
			}
		}
		var err error
		if checks.Deleted, err = deletedConversations(ctx, tx, contract.GuardedConversations(items, guards)); err != nil {
			return err
		}
		if checks.Stale, err = staleSources(ctx, tx, contract.DerivedChecks(items, guards)); err != nil {
			return err
		}
		// The BM25 statistics locks of every user first, in one order:
		// the statements' triggers would otherwise take them as each
		// statement comes, and two batches could deadlock.
		var tenants, userIDs []string
		for _, it := range items {
			if !checks.Refused(it) {
				tenants, userIDs = append(tenants, it.Tenant), append(userIDs, it.User)
			}
		}
		if len(userIDs) > 0 {
			if _, err := tx.Exec(ctx, "SELECT memory_bm25_lock($1, $2)", tenants, userIDs); err != nil {
				return fmt.Errorf("lock statistics: %w", unavailable(err))
			}
		}
		// New items are inserted before their conversations are locked:
		// inserting is the costly part (the HNSW index, the term
		// statistics), and a capture saving a turn of the conversation
		// waits for the lock. Nothing else is written before the lock, so
		// a supersession committed meanwhile deleted no row of this
		// transaction's; the rows inserted for a message found superseded
		// once the lock is held are deleted again below.
		inserted, err := insertNewItems(ctx, tx, items, checks, now)
		if err != nil {
			return err
		}
		stored, err := storedSources(ctx, tx, contract.SupersededChecks(items))
		if err != nil {
			return err
		}
		checks.Superseded = contract.NotLive(items, guards, stored)
		if checks.Moved, err = movedSources(ctx, tx, contract.MovedChecks(items)); err != nil {
			return err
		}
		var undo []int64
		b := &pgx.Batch{}
		for i, it := range items {
			placed, ok := checks.Place(it)
			switch {
			case checks.Refused(it):
			case !ok:
				if inserted[i] != 0 {
					undo = append(undo, inserted[i])
				}
			case inserted[i] == 0:
				b.Queue(upsertItemSQL, args(placed)...)
			case placed.Conversation != it.Conversation:
				// Inserted before the lock, in the conversation its
				// message has since left (see Adopt).
				b.Queue(`UPDATE memory_items SET conversation = $2 WHERE id = $1`, inserted[i], placed.Conversation)
			}
		}
		if len(undo) > 0 {
			b.Queue(`DELETE FROM memory_items WHERE id = ANY($1)`, undo)
		}
		return unavailable(tx.SendBatch(ctx, b).Close()) // an empty batch sends nothing
	})
	if err != nil {
		return fmt.Errorf("postgres: add %d items: %w", len(items), err)
	}
	return nil
}

// storedSources returns those of srcs (contract.SupersededChecks) stored in
// their conversation, true when superseded (contract.NotLive). It first
// takes a share lock on their conversations' rows, which SaveExchange holds
// exclusively while it supersedes a branch (and deletes the branch's
// items): the check then sees every supersession committed before, and a
// later one waits for this transaction and deletes what it stored.
func storedSources(ctx context.Context, tx pgx.Tx, srcs []contract.Source) (map[contract.Source]bool, error) {
	if len(srcs) == 0 {
		return nil, nil
	}
	tenants, users, convs, keys := sourceColumns(srcs)
	if _, err := tx.Exec(ctx, `
		SELECT 1 FROM conversations c
		WHERE (c.tenant, c.user_id, c.id) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))
		ORDER BY c.tenant, c.user_id, c.id
		FOR SHARE`, tenants, users, convs); err != nil {
		return nil, fmt.Errorf("lock conversations: %w", unavailable(err))
	}
	rows, err := tx.Query(ctx, `
		SELECT m.tenant, m.user_id, m.conversation, m.key, m.superseded_at IS NOT NULL
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS u(tenant, user_id, conversation, key)
		JOIN messages m ON m.tenant = u.tenant AND m.key = u.key
			AND m.user_id = u.user_id AND m.conversation = u.conversation`, tenants, users, convs, keys)
	set := map[contract.Source]bool{}
	var src contract.Source
	var superseded bool
	return set, eachRow(rows, err, "check superseded messages", []any{&src.Tenant, &src.User, &src.Conversation, &src.Key, &superseded},
		func() { set[src] = superseded })
}

// staleSources returns, by contract.DerivedOf, those of its
// (contract.DerivedChecks) whose summary or fact is no longer stored as it
// was read. Call it after guard, whose lock DeleteConversation waits for.
func staleSources(ctx context.Context, tx pgx.Tx, its []memory.Item) (map[contract.Source]bool, error) {
	if len(its) == 0 {
		return nil, nil
	}
	srcs, at := make([]contract.Source, len(its)), make([]time.Time, len(its))
	for i, it := range its {
		srcs[i], at[i] = contract.DerivedOf(it), it.CreatedAt
	}
	tenants, users, convs, keys := sourceColumns(srcs)
	rows, err := tx.Query(ctx, `
		SELECT x.t, x.u, x.c, x.k FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[]) AS x(t, u, c, k, a)
		WHERE NOT EXISTS (SELECT 1 FROM facts f WHERE f.tenant = x.t AND f.user_id = x.u AND x.k = 'fact:' || f.id
				AND coalesce(f.source_conversation, '') = x.c AND f.superseded_at IS NULL AND f.updated_at = x.a)
			AND NOT EXISTS (SELECT 1 FROM summaries s WHERE s.tenant = x.t AND s.user_id = x.u AND s.conversation = x.c
				AND x.k = 'summary:' || x.c || ':v' || s.version AND s.created_at = x.a)`, tenants, users, convs, keys, at)
	stale, src := map[contract.Source]bool{}, contract.Source{}
	return stale, eachRow(rows, err, "check item sources", []any{&src.Tenant, &src.User, &src.Conversation, &src.Key},
		func() { stale[src] = true })
}

// movedSources returns, for those of srcs (contract.MovedChecks, of the
// default conversation) whose message moved out of it (see Adopt), the
// conversation that holds it now. It runs after storedSources, whose share
// lock on the default conversation's row orders it with a move. Only
// messages no longer in the default conversation are looked up further.
func movedSources(ctx context.Context, tx pgx.Tx, srcs []contract.Source) (map[contract.Source]string, error) {
	if len(srcs) == 0 {
		return nil, nil
	}
	tenants, users, _, keys := sourceColumns(srcs)
	rows, err := tx.Query(ctx, `
		WITH missing AS MATERIALIZED (
			SELECT u.tenant, u.user_id, u.key
			FROM unnest($1::text[], $2::text[], $3::text[]) AS u(tenant, user_id, key)
			WHERE NOT EXISTS (SELECT 1 FROM messages d
				WHERE d.tenant = u.tenant AND d.user_id = u.user_id AND d.conversation = $4 AND d.key = u.key))
		SELECT u.tenant, u.user_id, u.key, m.conversation
		FROM missing u
		CROSS JOIN LATERAL (SELECT m.conversation FROM messages m
			WHERE m.tenant = u.tenant AND m.user_id = u.user_id AND m.key = u.key AND m.superseded_at IS NULL
			LIMIT 1) m`, tenants, users, keys, memory.DefaultConversation)
	out := map[contract.Source]string{}
	src := contract.Source{Identity: memory.Identity{Conversation: memory.DefaultConversation}}
	var conv string
	return out, eachRow(rows, err, "find moved messages", []any{&src.Tenant, &src.User, &src.Key, &conv},
		func() { out[src] = conv })
}

// sourceColumns returns srcs as parallel columns.
func sourceColumns(srcs []contract.Source) (tenants, users, convs, keys []string) {
	for _, s := range srcs {
		tenants, users = append(tenants, s.Tenant), append(users, s.User)
		convs, keys = append(convs, s.Conversation), append(keys, s.Key)
	}
	return tenants, users, convs, keys
}

// ItemsToEmbed lists the items of every tenant to embed again by the
// contract (storetest.Knowledge).
func (s *Store) ItemsToEmbed(ctx context.Context, model string, dims int, afterID int64, limit int) ([]memory.Item, error) {
	if limit <= 0 {
		return nil, nil
	}
	items, err := collect(ctx, s.pool, func(r pgx.CollectableRow) (memory.Item, error) { return scanItem(r) },
		`SELECT `+itemColumns+` FROM memory_items
		WHERE id > $3 AND (embedding IS NULL OR model IS DISTINCT FROM $1 OR dims IS DISTINCT FROM $2)
		ORDER BY id LIMIT $4`, model, dims, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: items to embed: %w", err)
	}
	return items, nil
}

// EmbedItems stores the vectors of items (with Model and Dims) on the rows
// that still hold them, found by (tenant, user, kind, ref, chunk) and
// text, in one transaction; an item no longer stored (its user erased, its
// conversation deleted, its message superseded) is skipped, never written
// again. It returns memory.ErrInvalid (and stores nothing) when an item has
// no vector or its Dims disagree with it.
func (s *Store) EmbedItems(ctx context.Context, items []memory.Item) error {
	if len(items) == 0 {
		return nil
	}
	// By user, then source: the users' rows of memory_item_revisions are
	// locked at the commit in this order (migration 0010), the same for
	// every EmbedItems, so two of them never deadlock on them.
	items = slices.Clone(items)
	slices.SortFunc(items, func(a, b memory.Item) int {
		return cmp.Or(strings.Compare(a.Tenant, b.Tenant), strings.Compare(a.User, b.User),
			strings.Compare(a.Kind, b.Kind), strings.Compare(a.Ref, b.Ref), cmp.Compare(a.Chunk, b.Chunk))
	})
	b := &pgx.Batch{}
	for _, it := range items {
		if err := contract.ValidEmbedding(it, true); err != nil {
			return fmt.Errorf("postgres: embed items: %w", err)
		}
		b.Queue(`UPDATE memory_items SET embedding = $7, dims = $8, model = $9
			WHERE tenant = $1 AND user_id = $2 AND kind = $3 AND source = $4 AND chunk = $5 AND content = $6`,
			it.Tenant, it.User, it.Kind, it.Ref, it.Chunk, it.Text, vectorArg(it.Embedding), len(it.Embedding), it.Model)
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error { return unavailable(tx.SendBatch(ctx, b).Close()) })
	if err != nil {
		return fmt.Errorf("postgres: embed %d items: %w", len(items), err)
	}
	return nil
}

// upsertItemSQL stores an item, updating the stored one in place only when
// its text, time said, conversation or vector changed (see AddItems). Its
// arguments are the item's columns in insertNewItems' order.
const upsertItemSQL = `
			INSERT INTO memory_items (tenant, user_id, conversation, kind, source, chunk, content,
			                          embedding, dims, model, created_at, said_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
			ON CONFLICT (tenant, user_id, kind, source, chunk) DO UPDATE SET
				conversation = coalesce(EXCLUDED.conversation, memory_items.conversation),
				content = EXCLUDED.content,
				said_at = coalesce(EXCLUDED.said_at, memory_items.said_at),
				embedding = CASE WHEN EXCLUDED.embedding IS NULL AND EXCLUDED.content = memory_items.content
					THEN memory_items.embedding ELSE EXCLUDED.embedding END,
				dims = CASE WHEN EXCLUDED.embedding IS NULL AND EXCLUDED.content = memory_items.content
					THEN memory_items.dims ELSE EXCLUDED.dims END,
				model = CASE WHEN EXCLUDED.embedding IS NULL AND EXCLUDED.content = memory_items.content
					THEN memory_items.model ELSE EXCLUDED.model END
			WHERE memory_items.content IS DISTINCT FROM EXCLUDED.content
				OR EXCLUDED.said_at IS NOT NULL AND memory_items.said_at IS DISTINCT FROM EXCLUDED.said_at
				OR EXCLUDED.conversation IS NOT NULL AND memory_items.conversation IS DISTINCT FROM EXCLUDED.conversation
				OR EXCLUDED.embedding IS NOT NULL AND (memory_items.embedding IS DISTINCT FROM EXCLUDED.embedding
					OR memory_items.model IS DISTINCT FROM EXCLUDED.model OR memory_items.dims IS DISTINCT FROM EXCLUDED.dims)`

// insertNewItems inserts, in one statement, those of items checks does not
// refuse that are not stored yet, in the order given, and returns the id
// of the row each inserted (0: none; an item stored already, or a later
// one of the same source and chunk, is left to upsertItemSQL). One
// statement, not one per item: the BM25 statistics move once for the lot
// (migration 0003's statement trigger).
func insertNewItems(ctx context.Context, tx pgx.Tx, items []memory.Item, checks contract.ItemChecks, now time.Time) ([]int64, error) {
	type key struct {
		tenant, user, kind, source string
		chunk                      int32
	}
	var (
		t, u, k, src, text []string
		conv, model        []*string
		chunk              []int32
		dims               []*int32
		vecs               []*pgvector.Vector
		at                 []time.Time
		said               []*time.Time
		first              = map[key]int{} // index in items of the first item of each key
	)
	for i, it := range items {
		kk := key{it.Tenant, it.User, it.Kind, it.Ref, int32(it.Chunk)}
		if _, ok := first[kk]; ok || checks.Refused(it) {
			continue
		}
		first[kk] = i
		var d *int32
		var m *string
		if len(it.Embedding) > 0 {
			n := int32(len(it.Embedding))
			d, m = &n, &it.Model
		}
		created, saidAt := contract.ItemTimes(it, now)
		t, u, conv, k, src = append(t, it.Tenant), append(u, it.User), append(conv, nullString(it.Conversation)), append(k, it.Kind), append(src, it.Ref)
		chunk, text, vecs, dims, model = append(chunk, int32(it.Chunk)), append(text, it.Text), append(vecs, vectorArg(it.Embedding)), append(dims, d), append(model, m)
		at, said = append(at, created), append(said, saidAt)
	}
	inserted := make([]int64, len(items))
	if len(t) == 0 {
		return inserted, nil
	}
	rows, err := tx.Query(ctx, `
		INSERT INTO memory_items (tenant, user_id, conversation, kind, source, chunk, content,
		                          embedding, dims, model, created_at, said_at)
		SELECT t, u, c, k, s, n, b, e, d, m, a, w
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::text[],
		            $8::vector[], $9::int[], $10::text[], $11::timestamptz[], $12::timestamptz[])
			WITH ORDINALITY AS x(t, u, c, k, s, n, b, e, d, m, a, w, o)
		ORDER BY o
		ON CONFLICT (tenant, user_id, kind, source, chunk) DO NOTHING
		RETURNING tenant, user_id, kind, source, chunk, id`,
		t, u, conv, k, src, chunk, text, vecs, dims, model, at, said)
	var kk key
	var id int64
	err = eachRow(rows, err, "insert items", []any{&kk.tenant, &kk.user, &kk.kind, &kk.source, &kk.chunk, &id},
		func() { inserted[first[kk]] = id })
	return inserted, err
}
