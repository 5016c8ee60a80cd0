// Package scratch makes what the benchmark and the evaluation run a
// PostgreSQL + Redis gateway against: a throwaway PostgreSQL database with
// the vector extension and a key prefix of its own in Redis, and removes
// both afterwards.
package scratch

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// Backend is a throwaway database and Redis key prefix. Close removes both.
type Backend struct {
	// AdminURL is the server's maintenance database, for CREATE/DROP.
	AdminURL string
	// Name is the throwaway database's name, DBURL its URL.
	Name, DBURL string
	// RedisURL is the Redis server; Prefix the run's own key prefix.
	RedisURL, Prefix string
}

// New creates a database named memgate_<label>_… with the vector extension
// on the server at adminURL, and checks that Redis at redisURL answers.
func New(ctx context.Context, adminURL, redisURL, label string) (*Backend, error) {
	u, err := url.Parse(adminURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("postgres URL %q: want postgres://…", adminURL)
	}
	stamp := fmt.Sprintf("%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)
	b := &Backend{
		AdminURL: adminURL,
		Name:     "memgate_" + label + "_" + stamp,
		RedisURL: redisURL,
		Prefix:   "memgate-" + label + "-" + stamp + ":",
	}
	u.Path = "/" + b.Name
	b.DBURL = u.String()

	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{b.Name}.Sanitize()); err != nil {
		return nil, fmt.Errorf("create database %s: %w", b.Name, err)
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

func (b *Backend) createExtension(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, b.DBURL)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", b.Name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS vector"); err != nil {
		return fmt.Errorf("create extension vector: %w", err)
	}
	return nil
}

func (b *Backend) redisClient() (*redis.Client, error) {
	opts, err := redis.ParseURL(b.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("redis URL %q: %w", b.RedisURL, err)
	}
	return redis.NewClient(opts), nil
}

func (b *Backend) pingRedis(ctx context.Context) error {
	rdb, err := b.redisClient()
	if err != nil {
		return err
	}
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// Close drops the database and deletes the run's Redis keys. Call it after
// the gateway using them has stopped.
func (b *Backend) Close(ctx context.Context) error {
	return errors.Join(b.dropDatabase(ctx), b.deleteKeys(ctx))
}

func (b *Backend) dropDatabase(ctx context.Context) error {
	admin, err := pgx.Connect(ctx, b.AdminURL)
	if err != nil {
		return fmt.Errorf("connect to drop %s: %w", b.Name, err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{b.Name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", b.Name, err)
	}
	return nil
}

func (b *Backend) deleteKeys(ctx context.Context) error {
	rdb, err := b.redisClient()
	if err != nil {
		return err
	}
	defer rdb.Close()
	iter := rdb.Scan(ctx, 0, b.Prefix+"*", 500).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("scan redis keys %s*: %w", b.Prefix, err)
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
