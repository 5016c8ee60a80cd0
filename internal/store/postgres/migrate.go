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

// migrate applies pending migrations on conn (contract.Migrate). It holds
// a session advisory lock for the whole run, so concurrent callers wait
// and then find nothing left to do; each migration and its
// schema_migrations row commit together. A database a newer build migrated
// (it records a migration this build does not embed) is refused with a
// *contract.SchemaTooNewError, which is memory.ErrSchemaTooNew.
func migrate(ctx context.Context, conn *pgx.Conn, logger *slog.Logger) (err error) {
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
	apply := func(ctx context.Context, m contract.Migration) (applied bool, err error) {
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			var done bool
			if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)", m.Name).Scan(&done); err != nil || done {
				return err
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", m.Name)
			applied = err == nil
			return err
		})
		return applied, err
	}
	// A version is a file's name without ".sql" ("0026_conversation_deletions"):
	// its number leads it.
	recorded := func(ctx context.Context) (v int, err error) {
		err = conn.QueryRow(ctx, `SELECT COALESCE(MAX(CAST(substring(version FROM '^[0-9]+') AS integer)), 0) FROM schema_migrations`).Scan(&v)
		return v, err
	}
	if err := contract.Migrate(ctx, migrations.FS, recorded, apply, logger, "postgres"); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return nil
}
