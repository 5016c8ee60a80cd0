package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/store/storetest"
	sqlitemigrations "github.com/memgate/memgate/migrations/sqlite"
)

// TestOpenRefusesNewerSchema records a migration beyond this build's last,
// as a newer build would, and checks that Open refuses the file, naming
// both versions, and applies and records nothing.
func TestOpenRefusesNewerSchema(t *testing.T) {
	known := storetest.NewestMigration(t, sqlitemigrations.FS)
	path := filepath.Join(t.TempDir(), "memgate.db")
	s, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db := mustRawDB(t, path)
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'from_a_newer_build.sql', 0)`, known+1); err != nil {
		t.Fatal(err)
	}
	before := migrationRecords(t, db)

	_, err = sqlite.Open(context.Background(), path, nil)
	storetest.CheckSchemaTooNew(t, err, known)
	if after := migrationRecords(t, db); len(after) != len(before) {
		t.Errorf("schema_migrations had %d rows, %d after the refused Open", len(before), len(after))
	}
}
