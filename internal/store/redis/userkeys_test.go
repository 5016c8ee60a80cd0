package redis

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The prints (prints.go) and the resenders (resenders.go) keep one key
// per user, named by the caller's digest of the user; their tests share
// these checks.

// checkKeyPerUser fails unless the keys under prefix are one per user of
// users and none of them holds a user's name.
func checkKeyPerUser(tb testing.TB, ctx context.Context, rdb *Client, prefix string, users ...string) {
	tb.Helper()
	keys, err := rdb.Keys(ctx, prefix+"*").Result()
	if err != nil {
		tb.Fatal(err)
	}
	if len(keys) != len(users) {
		tb.Fatalf("keys %q, want one per user", keys)
	}
	for _, k := range keys {
		for _, u := range users {
			if strings.Contains(k, u) {
				tb.Errorf("key %q names the user", k)
			}
		}
	}
}

// mustUnreachableClient returns a client of a Redis nothing listens for
// (port 1), closed when the test ends, and a context that bounds the
// calls made with it.
func mustUnreachableClient(tb testing.TB) (*Client, context.Context) {
	tb.Helper()
	rdb, err := NewClient("redis://127.0.0.1:1/0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	tb.Cleanup(cancel)
	return rdb, ctx
}
