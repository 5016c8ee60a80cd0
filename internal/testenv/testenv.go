// Package testenv gives integration tests in any package a private
// PostgreSQL database and a private Redis key space on the services that
// scripts/services.sh starts.
//
// The base URLs come from MEMGATE_TEST_POSTGRES_URL and
// MEMGATE_TEST_REDIS_URL, defaulting to the local services. Under
// `go test -short` the helpers skip the test; otherwise an unreachable
// service fails it, so `make test` never passes by skipping.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// Environment variables and their defaults.
const (
	PostgresEnv     = "MEMGATE_TEST_POSTGRES_URL"
	RedisEnv        = "MEMGATE_TEST_REDIS_URL"
	DefaultPostgres = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	DefaultRedis    = "redis://127.0.0.1:6379/0"
)

// connectTimeout bounds reaching a service.
const connectTimeout = 10 * time.Second

const hint = "start the test services with `sudo bash scripts/services.sh` (or `make services`), or set %s"

// skipShort skips tb under -short: integration tests need real services.
func skipShort(tb testing.TB, what string) {
	tb.Helper()
	if testing.Short() {
		tb.Skipf("%s integration test skipped under -short", what)
	}
}

// randomSuffix returns n random bytes as lowercase hex.
func randomSuffix(tb testing.TB, n int) string {
	tb.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		tb.Fatalf("testenv: random name: %v", err)
	}
	return hex.EncodeToString(b)
}

// PostgresBaseURL returns the PostgreSQL server URL tests use, from
// MEMGATE_TEST_POSTGRES_URL or the default.
func PostgresBaseURL() string {
	if u := os.Getenv(PostgresEnv); u != "" {
		return u
	}
	return DefaultPostgres
}

// PostgresURL creates a fresh database with a random name on the test
// server, creates the vector extension in it, and returns its URL. The
// database is dropped (WITH (FORCE), so open pools do not block it) when the
// test ends. It skips under -short and fails the test when PostgreSQL or
// pgvector is unavailable.
func PostgresURL(tb testing.TB) string {
	tb.Helper()
	skipShort(tb, "PostgreSQL")
	base := PostgresBaseURL()
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		tb.Fatalf("testenv: PostgreSQL unreachable at %s: %v; "+hint, redactURL(base), err, PostgresEnv)
	}
	defer admin.Close(context.Background())

	name := "memgate_test_" + randomSuffix(tb, 8)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("testenv: create database %s: %v", name, err)
	}
	tb.Cleanup(func() { dropDatabase(tb, base, name) })

	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("testenv: parse %s: %v", PostgresEnv, err)
	}
	u.Path = "/" + name
	dbURL := u.String()

	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		tb.Fatalf("testenv: connect to %s: %v", name, err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS vector"); err != nil {
		tb.Fatalf("testenv: CREATE EXTENSION vector: %v; pgvector is missing: "+hint, err, PostgresEnv)
	}
	return dbURL
}

// dropDatabase removes a test database, disconnecting its sessions.
func dropDatabase(tb testing.TB, base, name string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		tb.Errorf("testenv: drop database %s: %v", name, err)
		return
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		tb.Errorf("testenv: drop database %s: %v", name, err)
	}
}

// RedisURL returns the Redis URL tests use, from MEMGATE_TEST_REDIS_URL or the
// default, after checking that Redis answers. It skips under -short and fails
// the test when Redis is unreachable. Tests share the server: isolate keys
// with RedisPrefix.
func RedisURL(tb testing.TB) string {
	tb.Helper()
	skipShort(tb, "Redis")
	u := os.Getenv(RedisEnv)
	if u == "" {
		u = DefaultRedis
	}
	opts, err := redis.ParseURL(u)
	if err != nil {
		tb.Fatalf("testenv: parse %s: %v", RedisEnv, err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		tb.Fatalf("testenv: Redis unreachable at %s: %v; "+hint, redactURL(u), err, RedisEnv)
	}
	return u
}

// RedisPrefix returns a key prefix unique to this test ("memgate-test:<hex>:")
// and deletes every key under it when the test ends. Pass it to the code under
// test as its key prefix.
func RedisPrefix(tb testing.TB) string {
	tb.Helper()
	u := RedisURL(tb)
	prefix := "memgate-test:" + randomSuffix(tb, 8) + ":"
	tb.Cleanup(func() {
		opts, err := redis.ParseURL(u)
		if err != nil {
			tb.Errorf("testenv: parse %s: %v", RedisEnv, err)
			return
		}
		c := redis.NewClient(opts)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
		defer cancel()
		if err := deleteKeys(ctx, c, prefix); err != nil {
			tb.Errorf("testenv: clean Redis keys %s*: %v", prefix, err)
		}
	})
	return prefix
}

// deleteKeys removes every key starting with prefix.
func deleteKeys(ctx context.Context, c *redis.Client, prefix string) error {
	iter := c.Scan(ctx, 0, escapeGlob(prefix)+"*", 500).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			if err := c.Unlink(ctx, batch...).Err(); err != nil {
				return fmt.Errorf("unlink: %w", err)
			}
			batch = batch[:0]
		}
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("scan: %w", err)
	}
	if len(batch) > 0 {
		if err := c.Unlink(ctx, batch...).Err(); err != nil {
			return fmt.Errorf("unlink: %w", err)
		}
	}
	return nil
}

// escapeGlob quotes the characters SCAN MATCH treats specially.
func escapeGlob(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`)
	return r.Replace(s)
}

// redactURL hides a password in a service URL before it is printed.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
