package redis

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// embeddingBatch bounds the keys of one MGET or one pipeline.
const embeddingBatch = 512

// EmbeddingCache keeps embeddings in Redis keyed by (model, dimensions,
// content hash), so indexing the same text twice — a redelivered capture, a
// reindex, a fact stated again — costs no embedding call. Each vector is a
// plain string of little-endian float32s (4 bytes a dimension) with a TTL,
// so Redis's own eviction bounds the cache. It is safe for concurrent use.
//
// The cache is content-only: a key names a model, a dimension and the hash
// of a text (recall.ContentHash), never a tenant or a user, and holds no
// text, so nothing in it can be listed by owner. Because no key says whose
// text it came from, an erasure empties it: Cache.DeleteUser deletes every
// key under the prefix (clearEmbeddings), so no vector of the erased user's
// text — a passage, a fact or a query — is left. A vector still being
// computed when the erasure runs can be written after it; the TTL, or the
// next erasure, removes it.
type EmbeddingCache struct {
	rdb    redis.UniversalClient
	prefix string
	ttl    time.Duration
}

// NewEmbeddingCache returns an embedding cache on rdb whose keys start with
// prefix and live for ttl (30 days when ttl <= 0).
func NewEmbeddingCache(rdb redis.UniversalClient, prefix string, ttl time.Duration) *EmbeddingCache {
	if ttl <= 0 {
		ttl = 30 * 24 * time.Hour
	}
	return &EmbeddingCache{rdb: rdb, prefix: prefix, ttl: ttl}
}

// embeddingSpace starts every key of the embedding cache after the prefix.
const embeddingSpace = "emb:"

// key names one cached vector. The hash comes last, so a model name with a
// ':' in it cannot collide with another model's key.
func (c *EmbeddingCache) key(model string, dims int, hash string) string {
	return c.prefix + embeddingSpace + model + ":" + strconv.Itoa(dims) + ":" + hash
}

// clearBatch is how many keys one SCAN step asks for and one UNLINK drops.
const clearBatch = 1000

// clearEmbeddings deletes every cached vector under prefix (the keys of an
// EmbeddingCache made with it), SCANning the key space in steps of
// clearBatch and unlinking what each step finds. rdb is one Redis server
// (NewClient's), whose SCAN sees every key. It returns how many keys it
// deleted.
func clearEmbeddings(ctx context.Context, rdb redis.UniversalClient, prefix string) (int, error) {
	match := globEscape(prefix+embeddingSpace) + "*"
	deleted := 0
	var cursor uint64
	for {
		keys, next, err := rdb.Scan(ctx, cursor, match, clearBatch).Result()
		if err != nil {
			return deleted, fmt.Errorf("redis: clear embeddings: %w", unavailable(err))
		}
		if len(keys) > 0 {
			n, err := rdb.Unlink(ctx, keys...).Result()
			if err != nil {
				return deleted, fmt.Errorf("redis: clear embeddings: %w", unavailable(err))
			}
			deleted += int(n)
		}
		if cursor = next; cursor == 0 {
			return deleted, nil
		}
	}
}

// globEscape escapes the characters a SCAN MATCH pattern gives a meaning.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// GetEmbeddings returns the cached vectors of the given content hashes that
// were made by model with dims dimensions; misses are simply absent from the
// map. Its caller (recall.Cached) checks each vector's length (a value of
// another size, corrupted, is a miss there).
func (c *EmbeddingCache) GetEmbeddings(ctx context.Context, model string, dims int, hashes []string) (map[string][]float32, error) {
	out := make(map[string][]float32, len(hashes))
	for start := 0; start < len(hashes); start += embeddingBatch {
		batch := hashes[start:min(start+embeddingBatch, len(hashes))]
		keys := make([]string, len(batch))
		for i, h := range batch {
			keys[i] = c.key(model, dims, h)
		}
		vals, err := c.rdb.MGet(ctx, keys...).Result()
		if err != nil {
			return nil, fmt.Errorf("redis: get embeddings: %w", unavailable(err))
		}
		for i, v := range vals {
			if s, ok := v.(string); ok {
				out[batch[i]] = decodeVector(s)
			}
		}
	}
	return out, nil
}

// PutEmbeddings caches vectors by content hash for model and dims, each with
// the cache's TTL. Its caller (recall.Cached) hands it only vectors of dims
// dimensions.
func (c *EmbeddingCache) PutEmbeddings(ctx context.Context, model string, dims int, vecs map[string][]float32) error {
	p := c.rdb.Pipeline()
	n := 0
	flush := func() error {
		if n == 0 {
			return nil
		}
		n = 0
		if _, err := p.Exec(ctx); err != nil {
			return fmt.Errorf("redis: put embeddings: %w", unavailable(err))
		}
		return nil
	}
	for h, v := range vecs {
		p.Set(ctx, c.key(model, dims, h), encodeVector(v), c.ttl)
		if n++; n == embeddingBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// encodeVector packs v as little-endian float32s.
func encodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// decodeVector unpacks little-endian float32s; len(s) is a multiple of 4.
func decodeVector(s string) []float32 {
	v := make([]float32, len(s)/4)
	for i := range v {
		j := 4 * i
		v[i] = math.Float32frombits(uint32(s[j]) | uint32(s[j+1])<<8 | uint32(s[j+2])<<16 | uint32(s[j+3])<<24)
	}
	return v
}
