package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// vectorCacheBytes bounds the vectors a Store keeps in memory for
// SearchVector, over all users (least recently searched evicted first): 128
// MiB is about 85,000 items of 384 dimensions. A user whose vectors alone
// exceed a quarter of it (about 21,000 items of 384 dimensions, 5,000 of
// 1,536) is searched in SQL instead.
const vectorCacheBytes = 128 << 20

// vecKey names one user's vectors of one model and dimension.
type vecKey struct {
	tenant, user, model string
	dims                int
}

// vecSet is one user's vectors of one model and dimension as of the
// revisions it was read at. A published vecSet is never written again: a
// refresh appends past its length (never read through it) or builds a new
// one.
type vecSet struct {
	added, changed int64 // memory_item_revisions when read
	maxID          int64 // highest id held (0: none)
	ids            []int64
	convs          []string // conversation ("" for none) per item
	refs           []string // source per item
	vecs           []float32
	norms          []float64 // Euclidean length per item (never 0)
}

// size is roughly what s holds in memory, in bytes.
func (s *vecSet) size() int {
	n := 4*len(s.vecs) + 8*len(s.ids) + 8*len(s.norms) + 32*len(s.convs)
	for i := range s.refs {
		n += len(s.refs[i]) + 16
	}
	return n
}

// vectorCache keeps users' vectors in memory, one vecSet per key, least
// recently used evicted first past max bytes.
type vectorCache = userCache[*vecSet]

// errTooBig reports a user whose vectors are not kept in memory.
var errTooBig = errors.New("vectors exceed the cache's share for one user")

// userVectors returns key's vectors, current as of a moment during the call:
// the cached set when the user's revisions have not moved, extended with the
// rows added since when only inserts happened, else read again whole. It
// returns errTooBig for a user too large to cache.
func (s *Store) userVectors(ctx context.Context, key vecKey) (*vecSet, error) {
	sl := s.vectors.slot(key)
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.tooBig {
		return nil, errTooBig
	}
	// The revisions are read before the rows: rows read later can only be
	// newer than the revisions say, and the next search then reads again.
	var added, changed int64
	err := s.reads.QueryRowContext(ctx, `SELECT added, changed FROM memory_item_revisions
		WHERE tenant = ? AND user_id = ?`, key.tenant, key.user).Scan(&added, &changed)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("read item revisions: %w", err)
	}
	cur := s.vectors.value(sl)
	if cur != nil && cur.changed == changed && cur.added == added {
		return cur, nil
	}
	next := &vecSet{}
	if cur != nil && cur.changed == changed {
		// Only inserts since: new rows have ids above every row held.
		// Appending past cur's length leaves what cur's readers see as is.
		c := *cur
		next = &c
	}
	next.added, next.changed = added, changed
	if err := s.loadVectors(ctx, key, next); err != nil {
		sl.tooBig = errors.Is(err, errTooBig)
		s.vectors.publish(sl, nil)
		return nil, err
	}
	s.vectors.publish(sl, next)
	return next, nil
}

// loadVectors appends to set key's rows with ids above set.maxID.
func (s *Store) loadVectors(ctx context.Context, key vecKey, set *vecSet) error {
	rows, err := s.reads.QueryContext(ctx, `SELECT id, COALESCE(conversation, ''), source, embedding FROM memory_items
		WHERE tenant = ? AND user_id = ? AND model = ? AND dims = ? AND id > ? AND embedding IS NOT NULL
		ORDER BY id`, key.tenant, key.user, key.model, key.dims, set.maxID)
	if err != nil {
		return fmt.Errorf("load vectors: %w", err)
	}
	defer rows.Close()
	limit := s.vectors.max / 4
	for rows.Next() {
		var id int64
		var conv, ref string
		var b sql.RawBytes
		if err := rows.Scan(&id, &conv, &ref, &b); err != nil {
			return fmt.Errorf("load vectors: %w", err)
		}
		set.maxID = max(set.maxID, id)
		if len(b) != 4*key.dims {
			continue
		}
		start := len(set.vecs)
		for i := 0; i < key.dims; i++ {
			set.vecs = append(set.vecs, math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
		n := vecNorm(set.vecs[start:])
		if n == 0 {
			set.vecs = set.vecs[:start]
			continue
		}
		set.ids = append(set.ids, id)
		set.convs = append(set.convs, conv)
		set.refs = append(set.refs, ref)
		set.norms = append(set.norms, n)
		if 4*len(set.vecs) > limit {
			return errTooBig
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load vectors: %w", err)
	}
	return nil
}

// vecNorm is the length of a stored vector, summed as cosine sums it.
func vecNorm(y []float32) float64 {
	var v0, v1, v2, v3 float32
	i := 0
	for ; i+4 <= len(y); i += 4 {
		ys := y[i : i+4 : i+4]
		v0, v1, v2, v3 = v0+ys[0]*ys[0], v1+ys[1]*ys[1], v2+ys[2]*ys[2], v3+ys[3]*ys[3]
	}
	for ; i < len(y); i++ {
		v0 += y[i] * y[i]
	}
	return math.Sqrt(float64((v0 + v1) + (v2 + v3)))
}
