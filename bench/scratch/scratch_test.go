package scratch

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/memgate/memgate/internal/testenv"
)

// The throwaway database has the vector extension, and Close leaves
// nothing behind: neither the database nor a key under the prefix.
func TestBackend(t *testing.T) {
	redisURL := testenv.RedisURL(t) // skips under -short
	ctx := t.Context()
	b, err := New(ctx, testenv.PostgresBaseURL(), redisURL, "test")
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			b.Close(t.Context())
		}
	})
	conn, err := pgx.Connect(ctx, b.DBURL)
	if err != nil {
		t.Fatalf("connect to the throwaway database: %v", err)
	}
	var ext string
	err = conn.QueryRow(ctx, "SELECT extname FROM pg_extension WHERE extname = 'vector'").Scan(&ext)
	conn.Close(ctx)
	if err != nil {
		t.Fatalf("vector extension: %v", err)
	}

	opts, _ := redis.ParseURL(redisURL)
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	for _, k := range []string{b.Prefix + "queue", b.Prefix + "conv:a:b:c"} {
		if err := rdb.Set(ctx, k, "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	closed = true
	if n, err := rdb.Exists(ctx, b.Prefix+"queue", b.Prefix+"conv:a:b:c").Result(); err != nil || n != 0 {
		t.Errorf("%d keys left under %s (%v)", n, b.Prefix, err)
	}
	admin, err := pgx.Connect(ctx, testenv.PostgresBaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var left int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", b.Name).Scan(&left); err != nil || left != 0 {
		t.Errorf("database %s still exists (%d, %v)", b.Name, left, err)
	}
}

func TestBackendRejectsBadURL(t *testing.T) {
	if _, err := New(t.Context(), "mysql://x", "redis://127.0.0.1:6379/0", "test"); err == nil {
		t.Error("accepted a non-postgres URL")
	}
}
