package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
)

// scratchDB is a throwaway PostgreSQL database the measured gateway stores
// into, so no earlier run's memory is in it.
type scratchDB struct {
	admin string // the server's maintenance database, for CREATE/DROP
	name  string
	url   string
}

// newScratchDB creates a database with the vector extension on the server
// at adminURL.
func newScratchDB(ctx context.Context, adminURL string) (*scratchDB, error) {
	u, err := url.Parse(adminURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("-postgres-url %q: want postgres://…", adminURL)
	}
	db := &scratchDB{admin: adminURL, name: fmt.Sprintf("memgate_eval_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9)}
	u.Path = "/" + db.name
	db.url = u.String()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db.name}.Sanitize()); err != nil {
		return nil, fmt.Errorf("create database %s: %w", db.name, err)
	}
	c2, err := pgx.Connect(ctx, db.url)
	if err != nil {
		db.drop(context.WithoutCancel(ctx), slog.New(slog.DiscardHandler))
		return nil, fmt.Errorf("connect to %s: %w", db.name, err)
	}
	defer c2.Close(context.WithoutCancel(ctx))
	if _, err := c2.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS vector"); err != nil {
		db.drop(context.WithoutCancel(ctx), slog.New(slog.DiscardHandler))
		return nil, fmt.Errorf("create extension vector: %w", err)
	}
	return db, nil
}

// drop removes the database, logging a failure.
func (db *scratchDB) drop(ctx context.Context, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, db.admin)
	if err == nil {
		_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db.name}.Sanitize()+" WITH (FORCE)")
		conn.Close(ctx)
	}
	if err != nil {
		log.Warn("drop the eval database", "database", db.name, "err", err)
	}
}
