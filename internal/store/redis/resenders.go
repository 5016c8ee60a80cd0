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
	rdb    *Client
	prefix string
}

// NewResenders returns the shared resenders of the deployment whose Redis
// keys start with prefix (e.g. "memgate:").
func NewResenders(rdb *Client, prefix string) *Resenders {
	return &Resenders{rdb: rdb, prefix: prefix}
}

// key is user's key.
func (r *Resenders) key(user [32]byte) string {
	return r.prefix + "resender:" + hex.EncodeToString(user[:])
}

// Resends reports whether user was seen resending their history, in one
// round trip (EXISTS).
func (r *Resenders) Resends(ctx context.Context, user [32]byte) (bool, error) {
	n, err := r.rdb.Exists(ctx, r.key(user)).Result()
	if err != nil {
		return false, fmt.Errorf("redis: read resender: %w", unavailable(err))
	}
	return n > 0, nil
}

// AddResender records that user was seen resending their history, until
// ttl from now, in one round trip (SET with PX).
func (r *Resenders) AddResender(ctx context.Context, user [32]byte, ttl time.Duration) error {
	if err := r.rdb.Set(ctx, r.key(user), "1", ttl).Err(); err != nil {
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
