package postgres

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/store/contract"
	migrations "github.com/memgate/memgate/migrations/postgres"
)

// migrationLock is the pg_advisory_lock key that serializes migrations
// across every process sharing the database ("memgate" in ASCII).
const migrationLock int64 = 0x6d656d67617465

// migrate applies pending migrations on conn. It holds a session advisory
// lock for the whole run, so concurrent callers wait and then find nothing
// left to do; each migration and its schema_migrations row commit together.
func migrate(ctx context.Context, conn *pgx.Conn, logger *slog.Logger) (err error) {
	ms, err := contract.Migrations(migrations.FS)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLock); err != nil {
		return fmt.Errorf("postgres: take migration lock: %w", unavailable(err))
	}
	defer func() {
		if _, uerr := conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLock); uerr != nil && err == nil {
			err = fmt.Errorf("postgres: release migration lock: %w", uerr)
		}
	}()

	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    text PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return fmt.Errorf("postgres: create schema_migrations: %w", err)
	}
	rows, err := conn.Query(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return fmt.Errorf("postgres: read schema_migrations: %w", err)
	}
	applied, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("postgres: read schema_migrations: %w", err)
	}
	done := make(map[string]bool, len(applied))
	for _, v := range applied {
		done[v] = true
	}

	for _, m := range ms {
		if done[m.Name] {
			continue
		}
		if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", m.Name)
			return err
		}); err != nil {
			return fmt.Errorf("postgres: migration %s: %w", m.Name, err)
		}
		logger.Info("postgres: applied migration", "version", m.Name)
	}
	return nil
}
