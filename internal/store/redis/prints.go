package redis

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Prints keeps, per user, the prints of their newest exchanges that the
// gateway processes share (a request about a chat, an app's title request,
// may reach another process than the chat's turns: see proxy's
// transcripts). Each user's are a list, newest first, under
// "<prefix>transcripts:" and the hex of the digest naming the user (the
// caller's: never the user's id); a print is opaque bytes (hashes and
// lengths, never text). The list holds the newest few and expires as a
// whole, each write bounding and refreshing both. It is safe for
// concurrent use.
type Prints struct {
	rdb     *redis.Client
	prefix  string
	breaker *Breaker
}

// NewPrints returns the shared prints of the deployment whose Redis keys
// start with prefix (e.g. "memgate:"), their reads and writes guarded by
// breaker (nil: none).
func NewPrints(rdb *redis.Client, prefix string, breaker *Breaker) *Prints {
	return &Prints{rdb: rdb, prefix: prefix, breaker: breaker}
}

// key is the list of user's prints.
func (p *Prints) key(user [32]byte) string {
	return p.prefix + "transcripts:" + hex.EncodeToString(user[:])
}

// Prints returns user's prints, newest first, in one round trip (LRANGE);
// skipped while the breaker is open.
func (p *Prints) Prints(ctx context.Context, user [32]byte) ([][]byte, error) {
	var vals []string
	err := p.breaker.do(ctx, "prints_read", func(ctx context.Context) (err error) {
		vals, err = p.rdb.LRange(ctx, p.key(user), 0, -1).Result()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("redis: read prints: %w", unavailable(err))
	}
	out := make([][]byte, len(vals))
	for i, v := range vals {
		out[i] = []byte(v)
	}
	return out, nil
}

// AddPrint makes print user's newest, keeps the keep newest and makes the
// list expire ttl from now, in one MULTI (one round trip): the list never
// holds more than keep, nor outlives its newest print by more than ttl.
// It is skipped while the breaker is open.
func (p *Prints) AddPrint(ctx context.Context, user [32]byte, print []byte, keep int, ttl time.Duration) error {
	key := p.key(user)
	err := p.breaker.do(ctx, "prints_write", func(ctx context.Context) error {
		_, err := p.rdb.TxPipelined(ctx, func(tx redis.Pipeliner) error {
			tx.LPush(ctx, key, print)
			tx.LTrim(ctx, key, 0, int64(keep)-1)
			tx.PExpire(ctx, key, ttl)
			return nil
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("redis: add print: %w", unavailable(err))
	}
	return nil
}

// ForgetPrints deletes user's prints (the user was erased).
func (p *Prints) ForgetPrints(ctx context.Context, user [32]byte) error {
	if err := p.rdb.Del(ctx, p.key(user)).Err(); err != nil {
		return fmt.Errorf("redis: forget prints: %w", unavailable(err))
	}
	return nil
}
