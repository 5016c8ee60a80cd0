package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// pgBackend is what the memgate-pg gateway stores into: a throwaway
// PostgreSQL database with the vector extension, and a unique key prefix in
// Redis. close removes both.
type pgBackend struct {
	adminURL string // the server's maintenance database, for CREATE/DROP
	name     string // the throwaway database
	dbURL    string
	redisURL string
	prefix   string // Redis key prefix, unique to this run
}

// newPGBackend creates the throwaway database on the server at adminURL
// and checks that Redis answers.
func newPGBackend(ctx context.Context, adminURL, redisURL string) (*pgBackend, error) {
	u, err := url.Parse(adminURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("postgres URL %q: want postgres://…", adminURL)
	}
	stamp := fmt.Sprintf("%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	b := &pgBackend{
		adminURL: adminURL,
		name:     "memgate_bench_" + stamp,
		redisURL: redisURL,
		prefix:   "memgate-bench-" + stamp + ":",
	}
	u.Path = "/" + b.name
	b.dbURL = u.String()

	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres (set %s or -postgres-url): %w", postgresEnv, err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{b.name}.Sanitize()); err != nil {
		return nil, fmt.Errorf("create database %s: %w", b.name, err)
	}
	if err := b.createExtension(ctx); err != nil {
		b.dropDatabase(context.WithoutCancel(ctx))
		return nil, err
	}
	if err := b.pingRedis(ctx); err != nil {
		b.dropDatabase(context.WithoutCancel(ctx))
		return nil, err
	}
	return b, nil
}

func (b *pgBackend) createExtension(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", b.name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS vector"); err != nil {
		return fmt.Errorf("create extension vector: %w", err)
	}
	return nil
}

func (b *pgBackend) redisClient() (*redis.Client, error) {
	opts, err := redis.ParseURL(b.redisURL)
	if err != nil {
		return nil, fmt.Errorf("redis URL %q: %w", b.redisURL, err)
	}
	return redis.NewClient(opts), nil
}

func (b *pgBackend) pingRedis(ctx context.Context) error {
	rdb, err := b.redisClient()
	if err != nil {
		return err
	}
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis (set %s or -redis-url): %w", redisEnv, err)
	}
	return nil
}

// gatewayEnv writes the gateway's config file into dir (the Redis prefix has
// no environment variable) and returns the environment selecting the store.
func (b *pgBackend) gatewayEnv(dir string) ([]string, error) {
	path := filepath.Join(dir, "memgate-pg.yaml")
	yaml := fmt.Sprintf("# written by bench for one run\nstore:\n  redis_prefix: %q\n", b.prefix)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		return nil, fmt.Errorf("write gateway config: %w", err)
	}
	return []string{
		"GATEWAY_CONFIG=" + path,
		"GATEWAY_STORE=postgres",
		"GATEWAY_POSTGRES_URL=" + b.dbURL,
		"GATEWAY_REDIS_URL=" + b.redisURL,
	}, nil
}

// close drops the database and deletes the run's Redis keys. Call it after
// the gateway using them has stopped.
func (b *pgBackend) close(ctx context.Context) error {
	return errors.Join(b.dropDatabase(ctx), b.deleteKeys(ctx))
}

func (b *pgBackend) dropDatabase(ctx context.Context) error {
	admin, err := pgx.Connect(ctx, b.adminURL)
	if err != nil {
		return fmt.Errorf("connect to drop %s: %w", b.name, err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{b.name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", b.name, err)
	}
	return nil
}

func (b *pgBackend) deleteKeys(ctx context.Context) error {
	rdb, err := b.redisClient()
	if err != nil {
		return err
	}
	defer rdb.Close()
	iter := rdb.Scan(ctx, 0, b.prefix+"*", 500).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("scan redis keys %s*: %w", b.prefix, err)
	}
	for len(keys) > 0 {
		n := min(len(keys), 500)
		if err := rdb.Del(ctx, keys[:n]...).Err(); err != nil {
			return fmt.Errorf("delete redis keys: %w", err)
		}
		keys = keys[n:]
	}
	return nil
}

// analyzeAfterPrefill updates the planner statistics of every PostgreSQL
// database the prefill filled, once the gateways are idle (the prefill's
// enrichment has indexed it). A database in service has been analyzed by
// autovacuum; a throwaway one measured in its first minute has not, and
// PostgreSQL then plans the text search's per-hit item lookups on whichever
// index of (tenant, user) it finds first, scanning the user's items for
// every hit: that is the first minute of a new deployment, not the warm
// conversation the cells measure.
func analyzeAfterPrefill(ctx context.Context, servers map[string]*server, stderr io.Writer) error {
	for _, s := range servers {
		if s.dbURL == "" {
			continue
		}
		if err := settleServers(ctx, servers, stderr); err != nil {
			return err
		}
		conn, err := pgx.Connect(ctx, s.dbURL)
		if err != nil {
			return fmt.Errorf("analyze %s: %w", s.name, err)
		}
		_, err = conn.Exec(ctx, "ANALYZE")
		conn.Close(context.WithoutCancel(ctx))
		if err != nil {
			return fmt.Errorf("analyze %s: %w", s.name, err)
		}
	}
	return nil
}
