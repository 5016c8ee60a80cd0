package contract

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/memgate/memgate/internal/memory"
)

// ApplyMigration applies m with its schema_migrations record, in one
// transaction, unless the store records m already; applied reports
// whether it ran. A store's implementation is its SQL alone.
type ApplyMigration func(ctx context.Context, m Migration) (applied bool, err error)

// RecordedVersion returns the highest migration version the store's
// schema_migrations records, 0 when it records none (or has no such
// table yet). A store's implementation is its SQL alone.
type RecordedVersion func(ctx context.Context) (int, error)

// SchemaTooNewError reports a database that records a migration newer than
// the newest this build embeds: a newer build of memgate migrated it.
// errors.Is(err, memory.ErrSchemaTooNew) holds for it.
type SchemaTooNewError struct {
	// Store names the store ("sqlite", "postgres").
	Store string
	// Version is the newest migration the database records; Known the
	// newest this build embeds.
	Version, Known int
}

// Error names both versions and tells the operator what to do.
func (e *SchemaTooNewError) Error() string {
	return fmt.Sprintf("the %s database's schema is at migration %04d, but this build of memgate knows migrations up to %04d only: "+
		"a newer memgate migrated it; upgrade this binary to that release (or later) — an older one could corrupt what the newer schema relies on",
		e.Store, e.Version, e.Known)
}

// Is reports whether target is memory.ErrSchemaTooNew.
func (e *SchemaTooNewError) Is(target error) bool { return target == memory.ErrSchemaTooNew }

// Migrate applies the migrations of fsys (Migrations) in version order
// through apply, and logs each one applied to logger, naming the store.
// Before it applies anything, and again once it has, it reads the newest
// version the store records through recorded: one newer than the newest of
// fsys is a *SchemaTooNewError, and then nothing is applied (the second
// check catches a newer build migrating the database meanwhile).
func Migrate(ctx context.Context, fsys fs.FS, recorded RecordedVersion, apply ApplyMigration, logger *slog.Logger, store string) error {
	ms, err := Migrations(fsys)
	if err != nil {
		return err
	}
	known := 0
	if len(ms) > 0 {
		known = ms[len(ms)-1].Version
	}
	check := func() error {
		v, err := recorded(ctx)
		if err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if v > known {
			return &SchemaTooNewError{Store: store, Version: v, Known: known}
		}
		return nil
	}
	if err := check(); err != nil {
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
	return check()
}
