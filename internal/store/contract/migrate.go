package contract

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
)

// ApplyMigration applies m with its schema_migrations record, in one
// transaction, unless the store records m already; applied reports
// whether it ran. A store's implementation is its SQL alone.
type ApplyMigration func(ctx context.Context, m Migration) (applied bool, err error)

// Migrate applies the migrations of fsys (Migrations) in version order
// through apply, and logs each one applied to logger, naming the store.
func Migrate(ctx context.Context, fsys fs.FS, apply ApplyMigration, logger *slog.Logger, store string) error {
	ms, err := Migrations(fsys)
	if err != nil {
		return err
	}
	for _, m := range ms {
		applied, err := apply(ctx, m)
		if err != nil {
			return fmt.Errorf("apply migration %s: %w", m.Name, err)
		}
		if applied {
			logger.Info("applied migration", "store", store, "version", m.Version, "name", m.Name)
		}
	}
	return nil
}
