package redis

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/memgate/memgate/internal/memory"
)

// Tails keeps conversations' newest turns in Redis, shared by every gateway
// process using it: the second tier of the engine's cache of them
// (cache.TailTier). A conversation's tail is kept with the revision of its
// user's messages it was read at (memory.Revisions.Tail, moved by every
// write of them by any process) and is served only at that revision, so a
// tail can never be stale: a write moves the revision, and what was kept
// before it is never served again. One hash per conversation holds its
// newest tail (one field, named by the revision), for TTL after it was
// kept.
//
// An erasure or a delete leaves nothing of the user in Redis (Forget): each
// user's keys are listed in a set, deleted with them, and a tail read
// before the change but kept after it is refused (keepScript). When Redis
// fails, a lookup is a miss and a tail is not kept (both log a warning,
// never message contents); Forget returns an error wrapping
// memory.ErrUnavailable.
type Tails struct {
	rdb          redis.UniversalClient
	logger       *slog.Logger
	prefix       string
	ttl          time.Duration
	hits, misses prometheus.Counter
}

// NewTails returns Tails on rdb whose keys start with prefix and live for
// ttl after they were kept (1h when ttl <= 0).
func NewTails(rdb redis.UniversalClient, logger *slog.Logger, prefix string, ttl time.Duration) *Tails {
	if ttl <= 0 {
		ttl = time.Hour
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	counter := func(n, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "memgate_cache_" + n + "_total", Help: help,
			ConstLabels: prometheus.Labels{"cache": "recent-redis"}})
	}
	return &Tails{rdb: rdb, logger: logger, prefix: prefix, ttl: ttl,
		hits:   counter("hits", "Lookups a memory cache answered."),
		misses: counter("misses", "Lookups a memory cache could not answer.")}
}

// Collectors returns t's Prometheus collectors: the hits and misses of its
// lookups, as the engine's caches count theirs (cache "recent-redis").
func (t *Tails) Collectors() []prometheus.Collector {
	return []prometheus.Collector{t.hits, t.misses}
}

// Keys. Ids cannot contain '/', so the joins are unambiguous.
func (t *Tails) key(id memory.Identity) string {
	return t.prefix + "tail:" + id.Tenant + "/" + id.User + "/" + id.Conversation
}
func (t *Tails) userKey(tenant, user string) string {
	return t.prefix + "tails:" + tenant + "/" + user
}
func (t *Tails) erasedKey(tenant, user string) string {
	return t.prefix + "erased:" + tenant + "/" + user
}

// tailValue is a kept tail, gob-encoded (gob decodes a tail several times
// faster than encoding/json) in the field of its conversation's hash named
// by its revision.
type tailValue struct {
	All  bool
	Msgs []memory.Message
}

// Tail returns the newest messages of id's conversation kept at rev, oldest
// first, and whether they are all its live messages; ok is false when Redis
// holds none at rev (or fails: logged).
func (t *Tails) Tail(ctx context.Context, id memory.Identity, rev int64) (msgs []memory.Message, all, ok bool) {
	defer func() {
		if ok {
			t.hits.Inc()
		} else {
			t.misses.Inc()
		}
	}()
	v, err := t.rdb.HGet(ctx, t.key(id), strconv.FormatInt(rev, 10)).Result()
	if errors.Is(err, redis.Nil) {
		return nil, false, false // none kept, or at another revision: never served
	}
	if err != nil {
		t.logger.Warn("redis: reading a kept tail failed; reading the store", "tenant", id.Tenant, "err", err)
		return nil, false, false
	}
	var tv tailValue
	if err := gob.NewDecoder(strings.NewReader(v)).Decode(&tv); err != nil {
		t.logger.Warn("redis: a kept tail does not decode; reading the store", "tenant", id.Tenant, "err", err)
		return nil, false, false
	}
	for i := range tv.Msgs {
		m := &tv.Msgs[i]
		m.Tenant, m.User, m.Conversation = id.Tenant, id.User, id.Conversation
	}
	return tv.Msgs, tv.All, true
}

// keepScript keeps a tail, replacing the conversation's hash with one
// whose only field is the tail's revision, unless its user's erasure (or
// a delete) was recorded at a later revision (the tail was read before
// it); it lists the key in the user's set. KEYS: tail, user set, erasure.
// ARGV: revision, ttl ms, value.
var keepScript = redis.NewScript(`
local erased = redis.call('ZSCORE', KEYS[3], 'tail')
if erased and tonumber(ARGV[1]) < tonumber(erased) then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('SADD', KEYS[2], KEYS[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
`)

// KeepTail keeps msgs, read at rev, as the newest messages of id's
// conversation (all of its live messages when all is set), replacing what
// was kept of it. A failure is logged, not returned: the tail is read from
// the store again next time.
func (t *Tails) KeepTail(ctx context.Context, id memory.Identity, rev int64, msgs []memory.Message, all bool) {
	var v bytes.Buffer
	err := gob.NewEncoder(&v).Encode(tailValue{All: all, Msgs: msgs})
	if err == nil {
		keys := []string{t.key(id), t.userKey(id.Tenant, id.User), t.erasedKey(id.Tenant, id.User)}
		err = keepScript.Run(ctx, t.rdb, keys, rev, t.ttl.Milliseconds(), v.Bytes()).Err()
	}
	if err != nil {
		t.logger.Warn("redis: keeping a tail failed", "tenant", id.Tenant, "err", err)
	}
}

// Forget deletes every tail kept of the user and refuses, for the TTL,
// any tail of theirs read at a revision before rev (their Tail revision
// after an erasure or a delete): one read before the change and kept
// after it.
func (t *Tails) Forget(ctx context.Context, tenant, user string, rev int64) error {
	// The change is recorded first: a tail kept after it is refused, one
	// kept before it is in the set deleted next (GT: it never goes back).
	erased, set := t.erasedKey(tenant, user), t.userKey(tenant, user)
	var members *redis.StringSliceCmd
	_, err := t.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAddGT(ctx, erased, redis.Z{Score: float64(rev), Member: "tail"})
		p.PExpire(ctx, erased, t.ttl)
		members = p.SMembers(ctx, set)
		return nil
	})
	if keys := members.Val(); err == nil && len(keys) > 0 {
		// A tail kept meanwhile, after the record, is of a later revision.
		_, err = t.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Unlink(ctx, keys...)
			p.SRem(ctx, set, keys)
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("redis: forget kept tails: %w", unavailable(err))
	}
	return nil
}

// Count returns how many conversations' tails are kept of the user.
func (t *Tails) Count(ctx context.Context, tenant, user string) (int, error) {
	keys, err := t.rdb.SMembers(ctx, t.userKey(tenant, user)).Result()
	if err != nil || len(keys) == 0 {
		return 0, unavailable(err)
	}
	n, err := t.rdb.Exists(ctx, keys...).Result()
	return int(n), unavailable(err)
}
