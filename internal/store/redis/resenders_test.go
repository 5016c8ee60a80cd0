package redis

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/testenv"
)

// TestResendersShareAndForget: a user recorded as a resender is read so
// by any client of the Redis, another user is not; the key names the user
// by the caller's digest only and expires within its ttl, a later add
// refreshing it; ForgetResender deletes it, the other user's staying.
func TestResendersShareAndForget(t *testing.T) {
	ctx := context.Background()
	rdb := mustClient(t)
	prefix := testenv.RedisPrefix(t)
	r1, r2 := NewResenders(rdb, prefix, nil), NewResenders(mustClient(t), prefix, nil)
	ana, bob := sha256.Sum256([]byte("ana")), sha256.Sum256([]byte("bob"))
	if ok, err := r2.Resends(ctx, ana); err != nil || ok {
		t.Fatalf("before any add: %v, %v", ok, err)
	}
	for _, u := range [][32]byte{ana, bob} {
		if err := r1.AddResender(ctx, u, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := r2.Resends(ctx, ana); err != nil || !ok {
		t.Fatalf("after the add, read by another client: %v, %v", ok, err)
	}
	checkKeyPerUser(t, ctx, rdb, prefix, "ana", "bob")
	if ttl, err := rdb.PTTL(ctx, r1.key(ana)).Result(); err != nil || ttl <= 30*time.Minute || ttl > time.Hour {
		t.Fatalf("ttl %v (%v), want within the hour", ttl, err)
	}
	if err := rdb.PExpire(ctx, r1.key(ana), time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r2.AddResender(ctx, ana, time.Hour); err != nil {
		t.Fatal(err)
	}
	if ttl, err := rdb.PTTL(ctx, r1.key(ana)).Result(); err != nil || ttl <= 30*time.Minute {
		t.Fatalf("ttl after a later add %v (%v), want refreshed to the hour", ttl, err)
	}

	if err := r2.ForgetResender(ctx, ana); err != nil {
		t.Fatal(err)
	}
	if ok, err := r1.Resends(ctx, ana); err != nil || ok {
		t.Fatalf("after the forget: %v, %v", ok, err)
	}
	if ok, err := r1.Resends(ctx, bob); err != nil || !ok {
		t.Fatalf("another user after the forget: %v, %v", ok, err)
	}
}

// TestResendersFailWithoutRedis: with Redis unreachable, each call fails,
// rather than answering that the user was never seen resending.
func TestResendersFailWithoutRedis(t *testing.T) {
	rdb, ctx := mustUnreachableClient(t)
	r := NewResenders(rdb, "x:", nil)
	k := sha256.Sum256([]byte("ana"))
	if _, err := r.Resends(ctx, k); err == nil {
		t.Error("Resends answered without Redis")
	}
	if err := r.AddResender(ctx, k, time.Hour); err == nil {
		t.Error("AddResender answered without Redis")
	}
	if err := r.ForgetResender(ctx, k); err == nil {
		t.Error("ForgetResender answered without Redis")
	}
}
