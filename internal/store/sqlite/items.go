package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// itemColumns are the columns scanItem reads, in order.
const itemColumns = `memory_items.id, memory_items.tenant, memory_items.user_id,
	COALESCE(memory_items.conversation, ''), memory_items.kind, memory_items.source, memory_items.chunk,
	memory_items.text, memory_items.embedding, memory_items.model, memory_items.dims, memory_items.created_at,
	COALESCE(memory_items.said_at, memory_items.created_at)`

// AddItems stores recallable items by the contract (storetest.Knowledge;
// contract.ItemChecks) in one transaction or, for enrichment's (items with
// a GuardSince), in background transactions of at most backgroundItems
// items, so a save waiting for the single writer waits behind one of them,
// not behind a whole enrichment round (the upserts are idempotent).
func (s *Store) AddItems(ctx context.Context, items []memory.Item) error {
	if len(items) == 0 {
		return nil
	}
	if err := contract.ValidItem(items...); err != nil {
		return fmt.Errorf("add items: %w", err)
	}
	if !slices.ContainsFunc(items, func(it memory.Item) bool { return !it.GuardSince.IsZero() }) {
		return s.addItems(ctx, items, false)
	}
	return contract.Chunks(items, backgroundItems, func(chunk []memory.Item) error {
		return s.addItems(ctx, chunk, true)
	})
}

// backgroundItems is the most items one background AddItems transaction
// writes: a few milliseconds of the writer.
const backgroundItems = 16

// The statements that store items: sqlInsertItem one, sqlInsertItems
// (var) itemRows of them.
const (
	insertItemInto = `INSERT INTO memory_items (tenant, user_id, conversation, kind,
				source, chunk, text, embedding, model, dims, created_at, said_at) VALUES `
	itemRow    = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	itemUpsert = `
			ON CONFLICT (tenant, user_id, kind, source, chunk) DO UPDATE SET
				conversation = excluded.conversation, text = excluded.text, embedding = excluded.embedding,
				model = excluded.model, dims = excluded.dims,
				said_at = COALESCE(excluded.said_at, memory_items.said_at)`
	sqlInsertItem = insertItemInto + itemRow + itemUpsert
)

// itemRows is how many items one statement of AddItems stores (a
// background transaction's backgroundItems in one).
const itemRows = backgroundItems

var sqlInsertItems = insertItemInto + list(itemRow, itemRows) + itemUpsert

// addItems is AddItems' write transaction, a background one when
// background is set.
func (s *Store) addItems(ctx context.Context, items []memory.Item, background bool) error {
	now := time.Now()
	err := s.inWriteAs(ctx, background, func(sqlTx *sql.Tx) error {
		tx := writeTx{sqlTx, s.writes}
		checks, err := itemChecks(ctx, tx, items)
		if err != nil {
			return err
		}
		placed := make([]memory.Item, 0, len(items))
		for _, it := range items {
			if it, ok := checks.Place(it); ok {
				placed = append(placed, it)
			}
		}
		args := make([]any, 0, 12*min(len(placed), itemRows))
		return contract.RowBatches(placed, itemRows, func(batch []memory.Item) error {
			args = args[:0]
			for _, it := range batch {
				created, said := contract.ItemTimes(it, now)
				model, dims := it.Model, len(it.Embedding)
				if it.Embedding == nil {
					model = ""
				}
				args = append(args, it.Tenant, it.User, nullString(it.Conversation), it.Kind,
					it.Ref, it.Chunk, it.Text, encodeVector(it.Embedding), model, dims, nanos(created), nullTime(said))
			}
			query := sqlInsertItem
			if len(batch) == itemRows {
				query = sqlInsertItems
			}
			if _, err := tx.ExecContext(ctx, query, args...); err != nil {
				it := batch[0]
				return fmt.Errorf("upsert %d items from %s/%s/%d: %w", len(batch), it.Kind, it.Ref, it.Chunk, err)
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("add items: %w", err)
	}
	return nil
}

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

// ItemsToEmbed lists the items of every tenant to embed again by the
// contract (storetest.Knowledge), but those of a user whose erasure is
// under way: their text is not sent to be embedded.
func (s *Store) ItemsToEmbed(ctx context.Context, model string, dims int, afterID int64, limit int) ([]memory.Item, error) {
	if limit <= 0 {
		return []memory.Item{}, nil
	}
	items, err := queryAll(ctx, s.read, scanItem, `SELECT `+itemColumns+` FROM memory_items
		WHERE id > ? AND (embedding IS NULL OR model != ? OR dims != ?)`+notErasing("memory_items")+`
		ORDER BY id LIMIT ?`, afterID, model, dims, limit)
	if err != nil {
		return nil, fmt.Errorf("items to embed: %w", err)
	}
	return items, nil
}

// EmbedItems stores the vectors of items (with Model and Dims) on the rows
// that still hold them, found by (tenant, user, kind, ref, chunk) and
// text, in background transactions of at most backgroundItems items; an
// item no longer stored (its user erased, its conversation deleted, its
// message superseded) is skipped, never written again. It returns
// memory.ErrInvalid (and stores nothing) when an item has no vector or its
// Dims disagree with it.
func (s *Store) EmbedItems(ctx context.Context, items []memory.Item) error {
	for _, it := range items {
		if err := contract.ValidEmbedding(it, true); err != nil {
			return fmt.Errorf("embed items: %w", err)
		}
	}
	err := contract.Chunks(items, backgroundItems, func(chunk []memory.Item) error {
		return s.inWriteAs(ctx, true, func(tx *sql.Tx) error {
			for _, it := range chunk {
				if _, err := tx.ExecContext(ctx, `UPDATE memory_items SET embedding = ?, model = ?, dims = ?
					WHERE tenant = ? AND user_id = ? AND kind = ? AND source = ? AND chunk = ? AND text = ?`,
					encodeVector(it.Embedding), it.Model, len(it.Embedding),
					it.Tenant, it.User, it.Kind, it.Ref, it.Chunk, it.Text); err != nil {
					return fmt.Errorf("update item %s/%s/%d: %w", it.Kind, it.Ref, it.Chunk, err)
				}
			}
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("embed items: %w", err)
	}
	return nil
}

// scanItem reads a row of itemColumns.
func scanItem(r rowScanner) (memory.Item, error) {
	var it memory.Item
	var vec []byte
	err := r.Scan(&it.ID, &it.Tenant, &it.User, &it.Conversation, &it.Kind, &it.Ref, &it.Chunk,
		&it.Text, &vec, &it.Model, &it.Dims, (*nanoTime)(&it.CreatedAt), (*nanoTime)(&it.SaidAt))
	it.Embedding = decodeVector(nil, vec)
	return it, err
}

// encodeVector stores a vector as little-endian float32s; nil stays NULL.
func encodeVector(v []float32) []byte {
	if v == nil {
		return nil
	}
	b, _ := binary.Append(nil, binary.LittleEndian, v) // a []float32 always encodes
	return b
}

// decodeVector reads a stored vector into dst's array (nil: a new one);
// NULL (or a truncated blob) is nil.
func decodeVector(dst []float32, b []byte) []float32 {
	if len(b) == 0 || len(b)%4 != 0 {
		return nil
	}
	dst = slices.Grow(dst[:0], len(b)/4)
	for i := 0; i < len(b); i += 4 {
		dst = append(dst, math.Float32frombits(binary.LittleEndian.Uint32(b[i:])))
	}
	return dst
}
