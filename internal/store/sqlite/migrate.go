package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/store/contract"
	sqlitemigrations "github.com/memgate/memgate/migrations/sqlite"
)

// Migrate applies the embedded migrations not applied yet
// (contract.Migrate), each in its own write transaction with its record:
// IMMEDIATE, so processes migrating the same file at once apply each once;
// then it finishes migration 0029 in Go (retombstone). Open calls it. A
// file a newer build migrated (it records a migration this build does not
// embed) is refused with a *contract.SchemaTooNewError, which is
// memory.ErrSchemaTooNew.
func (s *Store) Migrate(ctx context.Context) error {
	if err := contract.Migrate(ctx, sqlitemigrations.FS, s.recordedVersion, s.applyMigration, s.logger, "sqlite"); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := s.retombstone(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// recordedVersion is Migrate's contract.RecordedVersion.
func (s *Store) recordedVersion(ctx context.Context) (int, error) {
	var tables int
	if err := s.write.QueryRowContext(ctx,
		`SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&tables); err != nil || tables == 0 {
		return 0, err
	}
	var v int
	err := s.write.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

// applyMigration is Migrate's contract.ApplyMigration.
func (s *Store) applyMigration(ctx context.Context, m contract.Migration) (applied bool, err error) {
	err = s.inWrite(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER PRIMARY KEY,
			name       TEXT    NOT NULL,
			applied_at INTEGER NOT NULL
		)`); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil || n > 0 {
			return err
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.Version, m.Name+".sql", nanos(time.Now()))
		applied = err == nil
		return err
	})
	return applied, err
}
