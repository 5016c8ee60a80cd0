package testenv

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

func TestPostgresURLCreatesAndDropsDatabase(t *testing.T) {
	skipShort(t, "PostgreSQL")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var dbURL string
	t.Run("use", func(t *testing.T) {
		dbURL = PostgresURL(t)
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Fatalf("connect to test database: %v", err)
		}
		defer conn.Close(ctx)
		var dist float64
		if err := conn.QueryRow(ctx, "SELECT '[1,0]'::vector <=> '[0,1]'::vector").Scan(&dist); err != nil {
			t.Fatalf("vector extension not usable: %v", err)
		}
		if dist != 1 {
			t.Fatalf("cosine distance of orthogonal vectors = %v, want 1", dist)
		}
		// An open connection must not keep the database from being dropped.
		if _, err := conn.Exec(ctx, "CREATE TABLE t (x int)"); err != nil {
			t.Fatalf("create table: %v", err)
		}
	})
	if t.Failed() {
		return
	}

	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	if !strings.HasPrefix(name, "memgate_test_") {
		t.Fatalf("database name %q lacks the memgate_test_ prefix", name)
	}
	admin, err := pgx.Connect(ctx, PostgresBaseURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatalf("database %s still exists after the test ended", name)
	}
}

func TestPostgresURLIsUniquePerCall(t *testing.T) {
	a, b := PostgresURL(t), PostgresURL(t)
	if a == b {
		t.Fatalf("two calls returned the same database %s", a)
	}
}

func TestRedisPrefixCleansItsKeys(t *testing.T) {
	skipShort(t, "Redis")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts, err := redis.ParseURL(RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	defer c.Close()

	// A key outside the prefix that merely looks similar must survive.
	other := "memgate-test:keep:" + randomSuffix(t, 4)
	if err := c.Set(ctx, other, "x", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	defer c.Del(ctx, other)

	var prefix string
	t.Run("use", func(t *testing.T) {
		prefix = RedisPrefix(t)
		if prefix == RedisPrefix(t) {
			t.Fatal("two calls returned the same prefix")
		}
		for i := range 1200 { // more than one SCAN/UNLINK batch
			if err := c.Set(ctx, prefix+"k"+string(rune('a'+i%26))+randomSuffix(t, 3), "v", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
	})
	if t.Failed() {
		return
	}
	keys, err := c.Keys(ctx, escapeGlob(prefix)+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Fatalf("%d keys under %s survived the test", len(keys), prefix)
	}
	if n, err := c.Exists(ctx, other).Result(); err != nil || n != 1 {
		t.Fatalf("unrelated key %s removed (exists=%d, err=%v)", other, n, err)
	}
}

func TestEscapeGlob(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain:", "plain:"},
		{"a*b?", `a\*b\?`},
		{`[x]\`, `\[x\]\\`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := escapeGlob(tt.in); got != tt.want {
				t.Fatalf("escapeGlob(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
