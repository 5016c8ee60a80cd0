package redis

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/testenv"
)

// TestPrintsKeepTheNewestAndExpire: a user's prints come back newest
// first, at most the keep newest; the list expires ttl after the newest
// was added (each add refreshes it); another user's are apart; the key
// names the user by the caller's digest only; ForgetPrints deletes them.
func TestPrintsKeepTheNewestAndExpire(t *testing.T) {
	ctx := context.Background()
	rdb := mustClient(t)
	prefix := testenv.RedisPrefix(t)
	p := NewPrints(rdb, prefix, nil)
	ana, bob := sha256.Sum256([]byte("ana")), sha256.Sum256([]byte("bob"))
	if got, err := p.Prints(ctx, ana); err != nil || len(got) != 0 {
		t.Fatalf("no prints yet: %q, %v", got, err)
	}
	for i := range 6 {
		if err := p.AddPrint(ctx, ana, []byte(fmt.Sprintf("print %d", i)), 4, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.AddPrint(ctx, bob, []byte("bob's"), 4, time.Hour); err != nil {
		t.Fatal(err)
	}
	got, err := p.Prints(ctx, ana)
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, b := range got {
		s = append(s, string(b))
	}
	if want := "print 5,print 4,print 3,print 2"; strings.Join(s, ",") != want {
		t.Errorf("prints %q, want %s", s, want)
	}

	checkKeyPerUser(t, ctx, rdb, prefix, "ana", "bob")
	ttl, err := rdb.PTTL(ctx, p.key(ana)).Result()
	if err != nil || ttl <= 0 || ttl > time.Hour {
		t.Fatalf("ttl %v (%v), want within the hour", ttl, err)
	}
	// A later add sets the list's expiry from now, to its ttl.
	if err := p.AddPrint(ctx, ana, []byte("print 6"), 4, 30*time.Minute); err != nil {
		t.Fatal(err)
	}
	if ttl, err := rdb.PTTL(ctx, p.key(ana)).Result(); err != nil || ttl <= 0 || ttl > 30*time.Minute {
		t.Fatalf("ttl after a later add %v (%v), want within 30 minutes", ttl, err)
	}
	if n, err := rdb.LLen(ctx, p.key(ana)).Result(); err != nil || n != 4 {
		t.Fatalf("list length %d (%v), want 4", n, err)
	}

	if err := p.ForgetPrints(ctx, ana); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.Exists(ctx, p.key(ana)).Result(); err != nil || n != 0 {
		t.Fatalf("the forgotten user's prints still in Redis (%d, %v)", n, err)
	}
	if got, err := p.Prints(ctx, bob); err != nil || len(got) != 1 {
		t.Fatalf("another user's prints after the forget: %q, %v", got, err)
	}
}

// TestPrintsFailWithoutRedis: with Redis unreachable, each call fails,
// rather than answering that the user has no prints.
func TestPrintsFailWithoutRedis(t *testing.T) {
	rdb, ctx := mustUnreachableClient(t)
	p := NewPrints(rdb, "x:", nil)
	k := sha256.Sum256([]byte("ana"))
	if _, err := p.Prints(ctx, k); err == nil {
		t.Error("Prints answered without Redis")
	}
	if err := p.AddPrint(ctx, k, []byte("p"), 4, time.Hour); err == nil {
		t.Error("AddPrint answered without Redis")
	}
	if err := p.ForgetPrints(ctx, k); err == nil {
		t.Error("ForgetPrints answered without Redis")
	}
}
