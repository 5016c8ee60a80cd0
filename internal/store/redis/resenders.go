package redis

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"
)

// Resenders keeps the users seen resending their history (their app
// sends whole histories: see proxy's resenders), where every gateway
// process sharing the Redis reads them: a new chat's first turn that
// reaches a process that never saw the user resend is told by another's
// sighting. Each user is one small key, "<prefix>resender:" and the hex
// of the digest naming the user (the caller's: never the user's id),
// holding "1" and expiring as a whole, each write refreshing it. It is
// safe for concurrent use.
type Resenders struct {
	rdb     *Client
	prefix  string
	breaker *Breaker
}

// NewResenders returns the shared resenders of the deployment whose Redis
// keys start with prefix (e.g. "memgate:"), their reads and writes
// guarded by breaker (nil: none).
func NewResenders(rdb *Client, prefix string, breaker *Breaker) *Resenders {
	return &Resenders{rdb: rdb, prefix: prefix, breaker: breaker}
}

// key is user's key.
func (r *Resenders) key(user [32]byte) string {
	return r.prefix + "resender:" + hex.EncodeToString(user[:])
}

// Resends reports whether user was seen resending their history, in one
// round trip (EXISTS); skipped while the breaker is open.
func (r *Resenders) Resends(ctx context.Context, user [32]byte) (bool, error) {
	var n int64
	err := r.breaker.do(ctx, "newchat_read", func(ctx context.Context) (err error) {
		n, err = r.rdb.Exists(ctx, r.key(user)).Result()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("redis: read resender: %w", unavailable(err))
	}
	return n > 0, nil
}

// AddResender records that user was seen resending their history, until
// ttl from now, in one round trip (SET with PX); skipped while the
// breaker is open.
func (r *Resenders) AddResender(ctx context.Context, user [32]byte, ttl time.Duration) error {
	err := r.breaker.do(ctx, "newchat_write", func(ctx context.Context) error { return r.rdb.Set(ctx, r.key(user), "1", ttl).Err() })
	if err != nil {
		return fmt.Errorf("redis: add resender: %w", unavailable(err))
	}
	return nil
}

// ForgetResender deletes what was recorded of user (erased, or one of
// their conversations deleted).
func (r *Resenders) ForgetResender(ctx context.Context, user [32]byte) error {
	if err := r.rdb.Del(ctx, r.key(user)).Err(); err != nil {
		return fmt.Errorf("redis: forget resender: %w", unavailable(err))
	}
	return nil
}
