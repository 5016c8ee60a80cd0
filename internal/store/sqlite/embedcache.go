package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// The embedding cache (table embedding_cache) is content-only: a vector is
// kept under the model, its dimension and the hash of the text it was made
// from (recall.ContentHash), with no tenant (the column is always ''), no
// user and no text, so nothing in it can be listed or read by owner, and a
// hit tells only that some tenant's text had the same hash. Because no row
// says whose text it came from, DeleteUser empties the whole cache in the
// erasure's transaction: after an erasure no vector of the erased user's
// text — a stored passage, a fact or a query — is left in it. A vector still
// being computed when the erasure commits can be written after it (the
// write names no owner to refuse); the next erasure removes it.

// GetEmbeddings returns the cached vectors of model and dims for the given
// content hashes, keyed by hash; hashes never cached are absent from the map.
// The cache is shared by all tenants: a vector depends only on the model and
// the content. Its caller (recall.Cached) checks each vector's length.
func (s *Store) GetEmbeddings(ctx context.Context, model string, dims int, hashes []string) (map[string][]float32, error) {
	out := make(map[string][]float32, len(hashes))
	if len(hashes) == 0 {
		return out, nil
	}
	list, err := json.Marshal(hashes)
	if err != nil {
		return nil, fmt.Errorf("get embeddings: encode hashes: %w", err)
	}
	rows, err := s.read.QueryContext(ctx, `SELECT hash, vector FROM embedding_cache
		WHERE tenant = '' AND model = ? AND dims = ? AND hash IN (SELECT value FROM json_each(?))`,
		model, dims, string(list))
	if err != nil {
		return nil, fmt.Errorf("get embeddings: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var hash string
		var vec []byte
		if err := rows.Scan(&hash, &vec); err != nil {
			return nil, fmt.Errorf("get embeddings: %w", err)
		}
		out[hash] = decodeVector(vec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("get embeddings: %w", err)
	}
	return out, nil
}

// PutEmbeddings caches vectors of model and dims by content hash in one
// write transaction, replacing any cached under the same hash. Its caller
// (recall.Cached) hands it only vectors of dims dimensions.
func (s *Store) PutEmbeddings(ctx context.Context, model string, dims int, vecs map[string][]float32) error {
	if len(vecs) == 0 {
		return nil
	}
	now := nanos(time.Now())
	// No client waits on the cache's writes (recall.Cached writes after it
	// has answered): they let clients' writes go first.
	err := s.inBackgroundWrite(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, `INSERT INTO embedding_cache (tenant, model, dims, hash, vector, created_at)
			VALUES ('', ?, ?, ?, ?, ?)
			ON CONFLICT (tenant, model, dims, hash) DO UPDATE SET vector = excluded.vector, created_at = excluded.created_at`)
		if err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		defer stmt.Close()
		for hash, v := range vecs {
			if _, err := stmt.ExecContext(ctx, model, dims, hash, encodeVector(v), now); err != nil {
				return fmt.Errorf("cache %s: %w", hash, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("put embeddings: %w", err)
	}
	return nil
}
