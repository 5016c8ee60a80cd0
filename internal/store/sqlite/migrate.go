package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/store/contract"
	sqlitemigrations "github.com/memgate/memgate/migrations/sqlite"
)

// Migrate applies the embedded migrations that schema_migrations does not
// record yet, in version order, each in its own write transaction together
// with its record. Write transactions begin IMMEDIATE, so processes migrating
// the same file at once are serialized and each migration is applied once.
// Open calls Migrate; calling it again is a no-op unless the binary carries
// newer migrations.
func (s *Store) Migrate(ctx context.Context) error {
	ms, err := contract.Migrations(sqlitemigrations.FS)
	if err != nil {
		return err
	}
	err = s.inWrite(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    INTEGER PRIMARY KEY,
			name       TEXT    NOT NULL,
			applied_at INTEGER NOT NULL
		)`)
		return err
	})
	if err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	for _, m := range ms {
		applied := false
		err := s.inWrite(ctx, func(tx *sql.Tx) error {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
				m.Version, m.Name+".sql", nanos(time.Now())); err != nil {
				return err
			}
			applied = true
			return nil
		})
		if err != nil {
			return fmt.Errorf("migrate: apply %s: %w", m.Name, err)
		}
		if applied {
			s.logger.Info("applied sqlite migration", "version", m.Version, "name", m.Name)
		}
	}
	return nil
}
