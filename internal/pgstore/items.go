package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/memgate/memgate/internal/memory"
)

// itemColumns are the columns scanItem reads, in order.
const itemColumns = `id, tenant, user_id, coalesce(conversation, ''), kind, source, chunk, content,
	coalesce(model, ''), coalesce(dims, 0), created_at, coalesce(said_at, created_at)`

// scanItem reads one row of itemColumns followed by extra destinations.
func scanItem(row pgx.Row, extra ...any) (memory.Item, error) {
	var it memory.Item
	dest := append([]any{&it.ID, &it.Tenant, &it.User, &it.Conversation, &it.Kind, &it.Ref, &it.Chunk,
		&it.Text, &it.Model, &it.Dims, &it.CreatedAt, &it.SaidAt}, extra...)
	if err := row.Scan(dest...); err != nil {
		return memory.Item{}, err
	}
	it.CreatedAt, it.SaidAt = it.CreatedAt.UTC(), it.SaidAt.UTC()
	return it, nil
}

// vectorArg returns the embedding as a query argument: NULL when absent.
func vectorArg(v []float32) *pgvector.Vector {
	if len(v) == 0 {
		return nil
	}
	vec := pgvector.NewVector(v)
	return &vec
}

// embeddingOf checks an item's vector against its Model and Dims and returns
// the dims to record (0 with no vector).
func embeddingOf(it memory.Item) (int, error) {
	if len(it.Embedding) == 0 {
		return 0, nil
	}
	if it.Dims != 0 && it.Dims != len(it.Embedding) {
		return 0, fmt.Errorf("%w: item %s/%d has %d dims but a %d-dimension vector",
			memory.ErrInvalid, it.Ref, it.Chunk, it.Dims, len(it.Embedding))
	}
	if it.Model == "" {
		return 0, fmt.Errorf("%w: item %s/%d has a vector but no model", memory.ErrInvalid, it.Ref, it.Chunk)
	}
	return len(it.Embedding), nil
}

// validItem checks what AddItems stores.
func validItem(it memory.Item) error {
	switch {
	case !memory.ValidID(it.Tenant) || !memory.ValidID(it.User):
		return fmt.Errorf("%w: bad tenant or user id", memory.ErrInvalid)
	case it.Conversation != "" && !memory.ValidID(it.Conversation):
		return fmt.Errorf("%w: bad conversation id", memory.ErrInvalid)
	case it.Kind != "message" && it.Kind != "summary" && it.Kind != "fact":
		return fmt.Errorf("%w: unknown item kind %q", memory.ErrInvalid, it.Kind)
	case it.Ref == "":
		return fmt.Errorf("%w: item without ref", memory.ErrInvalid)
	case it.Chunk < 0:
		return fmt.Errorf("%w: negative chunk", memory.ErrInvalid)
	}
	_, err := embeddingOf(it)
	return err
}

// AddItems stores recallable items in one transaction. An item whose
// (tenant, user, kind, ref, chunk) exists already is updated in place — its
// text, conversation and vector — never duplicated, and left untouched when
// none of them changed (a re-indexed item then costs no new row version and
// no HNSW insertion); SaidAt (zero: CreatedAt) is stored as when the item's
// source was said; an update without a
// vector keeps the stored one when the text is unchanged and clears it
// otherwise (the text needs embedding again). A zero CreatedAt means now.
// A message item whose message was superseded (its branch replaced by an
// edit or a regeneration) is skipped: SaveExchange deleted the branch's
// items, and a late index must not bring them back. Items of a user that
// ctx's erasure guard refuses (erasure.go) are skipped.
func (s *Store) AddItems(ctx context.Context, items []memory.Item) error {
	if len(items) == 0 {
		return nil
	}
	for _, it := range items {
		if err := validItem(it); err != nil {
			return fmt.Errorf("pgstore: add items: %w", err)
		}
	}
	now := time.Now()
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		erased, err := guardItems(ctx, tx, items)
		if err != nil {
			return err
		}
		gone, err := supersededSources(ctx, tx, items)
		if err != nil {
			return err
		}
		var kept []memory.Item
		for _, it := range items {
			if it.Kind == "message" && gone[it.Tenant+"\x00"+it.Ref] || erased[[2]string{it.Tenant, it.User}] {
				continue
			}
			kept = append(kept, it)
		}
		if len(kept) == 0 {
			return nil
		}
		// The statistics locks of every user first, in one order: the
		// insert and update triggers of each statement would otherwise
		// take them in two runs, and two batches could deadlock.
		tenants, users := make([]string, len(kept)), make([]string, len(kept))
		for i, it := range kept {
			tenants[i], users[i] = it.Tenant, it.User
		}
		if _, err := tx.Exec(ctx, "SELECT memory_bm25_lock($1, $2)", tenants, users); err != nil {
			return fmt.Errorf("lock statistics: %w", unavailable(err))
		}
		for _, round := range upsertRounds(kept) {
			if _, err := tx.Exec(ctx, addItemsSQL, itemArgs(round, now)...); err != nil {
				return unavailable(err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgstore: add %d items: %w", len(items), err)
	}
	return nil
}

// addItemsSQL upserts the items given as parallel arrays in one statement,
// so the statistics triggers of memory_items (migrations/postgres 0003,
// 0008) run once for all of them. See AddItems for what an update keeps.
const addItemsSQL = `
	INSERT INTO memory_items AS m (tenant, user_id, conversation, kind, source, chunk, content,
	                               embedding, dims, model, created_at, said_at)
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::integer[],
		$7::text[], $8::vector[], $9::integer[], $10::text[], $11::timestamptz[], $12::timestamptz[])
	ON CONFLICT (tenant, user_id, kind, source, chunk) DO UPDATE SET
		conversation = coalesce(EXCLUDED.conversation, m.conversation),
		content = EXCLUDED.content,
		said_at = coalesce(EXCLUDED.said_at, m.said_at),
		embedding = CASE WHEN EXCLUDED.embedding IS NULL AND EXCLUDED.content = m.content
			THEN m.embedding ELSE EXCLUDED.embedding END,
		dims = CASE WHEN EXCLUDED.embedding IS NULL AND EXCLUDED.content = m.content
			THEN m.dims ELSE EXCLUDED.dims END,
		model = CASE WHEN EXCLUDED.embedding IS NULL AND EXCLUDED.content = m.content
			THEN m.model ELSE EXCLUDED.model END
	WHERE m.content IS DISTINCT FROM EXCLUDED.content
		OR EXCLUDED.said_at IS NOT NULL AND m.said_at IS DISTINCT FROM EXCLUDED.said_at
		OR EXCLUDED.conversation IS NOT NULL AND m.conversation IS DISTINCT FROM EXCLUDED.conversation
		OR EXCLUDED.embedding IS NOT NULL AND (m.embedding IS DISTINCT FROM EXCLUDED.embedding
			OR m.model IS DISTINCT FROM EXCLUDED.model OR m.dims IS DISTINCT FROM EXCLUDED.dims)`

// upsertRounds splits items into the fewest runs of statements that each
// hold a (tenant, user, kind, ref, chunk) at most once — one statement's
// ON CONFLICT cannot update a row twice — keeping the order of items that
// share a key, so a later one still updates what an earlier one stored.
// Most calls have no repeated key and make one round.
func upsertRounds(items []memory.Item) [][]memory.Item {
	type key struct {
		tenant, user, kind, ref string
		chunk                   int
	}
	var rounds [][]memory.Item
	seen := map[key]int{} // rounds that hold the key so far
	for _, it := range items {
		k := key{it.Tenant, it.User, it.Kind, it.Ref, it.Chunk}
		r := seen[k]
		seen[k] = r + 1
		if r == len(rounds) {
			rounds = append(rounds, nil)
		}
		rounds[r] = append(rounds[r], it)
	}
	return rounds
}

// itemArgs returns the parallel arrays addItemsSQL reads for items. A zero
// CreatedAt is now; a said-at time is stored only when the item brings one
// (else it reads as created_at), and an update without one keeps the
// stored time.
func itemArgs(items []memory.Item, now time.Time) []any {
	n := len(items)
	var (
		tenants, users, kinds, refs, texts = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		convs, models                      = make([]*string, n), make([]*string, n)
		chunks, dims                       = make([]int32, n), make([]*int32, n)
		vecs                               = make([]*pgvector.Vector, n)
		created, said                      = make([]time.Time, n), make([]*time.Time, n)
	)
	for i, it := range items {
		tenants[i], users[i], kinds[i], refs[i], texts[i] = it.Tenant, it.User, it.Kind, it.Ref, it.Text
		chunks[i] = int32(it.Chunk)
		if it.Conversation != "" {
			convs[i] = &it.Conversation
		}
		if d, _ := embeddingOf(it); d > 0 {
			d32 := int32(d)
			dims[i], models[i], vecs[i] = &d32, &it.Model, vectorArg(it.Embedding)
		}
		created[i] = it.CreatedAt
		if created[i].IsZero() {
			created[i] = now
		}
		switch {
		case !it.SaidAt.IsZero():
			said[i] = &it.SaidAt
		case !it.CreatedAt.IsZero():
			said[i] = &it.CreatedAt
		}
	}
	return []any{tenants, users, convs, kinds, refs, chunks, texts, vecs, dims, models, created, said}
}

// supersededSources returns, keyed tenant + "\x00" + key, the messages among
// the sources of items' message items that are superseded. It first takes a
// share lock on their conversations' rows, which SaveExchange holds
// exclusively while it supersedes a branch (and deletes the branch's items):
// the check then sees every supersession committed before, and a later one
// waits for this transaction and deletes what it stored.
func supersededSources(ctx context.Context, tx pgx.Tx, items []memory.Item) (map[string]bool, error) {
	var tenants, users, convs, keys []string
	for _, it := range items {
		if it.Kind == "message" && it.Conversation != "" {
			tenants, users = append(tenants, it.Tenant), append(users, it.User)
			convs, keys = append(convs, it.Conversation), append(keys, it.Ref)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	if _, err := tx.Exec(ctx, `
		SELECT 1 FROM conversations c
		WHERE (c.tenant, c.user_id, c.id) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[]))
		ORDER BY c.tenant, c.user_id, c.id
		FOR SHARE`, tenants, users, convs); err != nil {
		return nil, fmt.Errorf("lock conversations: %w", unavailable(err))
	}
	rows, err := tx.Query(ctx, `
		SELECT m.tenant, m.key
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS u(tenant, user_id, conversation, key)
		JOIN messages m ON m.tenant = u.tenant AND m.key = u.key
			AND m.user_id = u.user_id AND m.conversation = u.conversation
		WHERE m.superseded_at IS NOT NULL`, tenants, users, convs, keys)
	if err != nil {
		return nil, fmt.Errorf("check superseded messages: %w", unavailable(err))
	}
	set := map[string]bool{}
	var tenant, key string
	_, err = pgx.ForEachRow(rows, []any{&tenant, &key}, func() error {
		set[tenant+"\x00"+key] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("check superseded messages: %w", unavailable(err))
	}
	return set, nil
}

// ItemsToEmbed returns up to limit items of any tenant with ID > afterID
// whose vector is missing or was made by another model or dimension, in ID
// order, for a resumable reindex.
func (s *Store) ItemsToEmbed(ctx context.Context, model string, dims int, afterID int64, limit int) ([]memory.Item, error) {
	if limit <= 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+itemColumns+` FROM memory_items
		WHERE id > $3 AND (embedding IS NULL OR model IS DISTINCT FROM $1 OR dims IS DISTINCT FROM $2)
		ORDER BY id LIMIT $4`, model, dims, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("pgstore: items to embed: %w", unavailable(err))
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (memory.Item, error) { return scanItem(r) })
	if err != nil {
		return nil, fmt.Errorf("pgstore: items to embed: %w", unavailable(err))
	}
	return items, nil
}

// SetEmbeddings stores new vectors, with their Model and Dims, for items by
// ID (and by Tenant and User when set, which lets the update use the primary
// key). Items that no longer exist are skipped.
func (s *Store) SetEmbeddings(ctx context.Context, items []memory.Item) error {
	if len(items) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, it := range items {
		dims, err := embeddingOf(it)
		if err != nil {
			return fmt.Errorf("pgstore: set embeddings: %w", err)
		}
		if dims == 0 {
			return fmt.Errorf("pgstore: set embeddings: %w: item %d without a vector", memory.ErrInvalid, it.ID)
		}
		if it.Tenant != "" && it.User != "" {
			b.Queue(`UPDATE memory_items SET embedding = $4, dims = $5, model = $6
				WHERE tenant = $1 AND user_id = $2 AND id = $3`,
				it.Tenant, it.User, it.ID, vectorArg(it.Embedding), dims, it.Model)
		} else {
			b.Queue(`UPDATE memory_items SET embedding = $2, dims = $3, model = $4 WHERE id = $1`,
				it.ID, vectorArg(it.Embedding), dims, it.Model)
		}
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return unavailable(err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgstore: set %d embeddings: %w", len(items), err)
	}
	return nil
}
