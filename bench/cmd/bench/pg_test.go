package main

import (
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/memgate/memgate/internal/testenv"
)

// The throwaway database has the vector extension, the gateway environment
// points at it and at a prefix of its own, and close leaves nothing behind.
func TestPGBackend(t *testing.T) {
	redisURL := testenv.RedisURL(t) // skips under -short
	ctx := t.Context()
	b, err := newPGBackend(ctx, testenv.PostgresBaseURL(), redisURL)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			b.close(t.Context())
		}
	})
	conn, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		t.Fatalf("connect to the throwaway database: %v", err)
	}
	var ext string
	err = conn.QueryRow(ctx, "SELECT extname FROM pg_extension WHERE extname = 'vector'").Scan(&ext)
	conn.Close(ctx)
	if err != nil {
		t.Fatalf("vector extension: %v", err)
	}

	env, err := b.gatewayEnv(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	if vars["GATEWAY_STORE"] != "postgres" || vars["GATEWAY_POSTGRES_URL"] != b.dbURL || vars["GATEWAY_REDIS_URL"] != redisURL {
		t.Errorf("gateway environment %v", vars)
	}
	yaml, err := os.ReadFile(vars["GATEWAY_CONFIG"])
	if err != nil || !strings.Contains(string(yaml), "redis_prefix: \""+b.prefix+"\"") {
		t.Errorf("config file %q (%v) does not set the prefix %q", yaml, err, b.prefix)
	}

	opts, _ := redis.ParseURL(redisURL)
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	for _, k := range []string{b.prefix + "queue", b.prefix + "conv:a:b:c"} {
		if err := rdb.Set(ctx, k, "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	closed = true
	if n, err := rdb.Exists(ctx, b.prefix+"queue", b.prefix+"conv:a:b:c").Result(); err != nil || n != 0 {
		t.Errorf("%d keys left under %s (%v)", n, b.prefix, err)
	}
	admin, err := pgx.Connect(ctx, testenv.PostgresBaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var left int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", b.name).Scan(&left); err != nil || left != 0 {
		t.Errorf("database %s still exists (%d, %v)", b.name, left, err)
	}
}

func TestPGBackendRejectsBadURL(t *testing.T) {
	if _, err := newPGBackend(t.Context(), "mysql://x", "redis://127.0.0.1:6379/0"); err == nil {
		t.Error("accepted a non-postgres URL")
	}
}
