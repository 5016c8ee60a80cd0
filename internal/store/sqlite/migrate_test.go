package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
	"github.com/memgate/memgate/internal/store/sqlite"
	sqlitemigrations "github.com/memgate/memgate/migrations/sqlite"
)

// TestOpenRefusesNewerSchema records a migration beyond this build's last,
// as a newer build would, and checks that Open refuses the file, naming
// both versions, and applies and records nothing.
func TestOpenRefusesNewerSchema(t *testing.T) {
	ms, err := contract.Migrations(sqlitemigrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	known := ms[len(ms)-1].Version
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
	if !errors.Is(err, memory.ErrSchemaTooNew) {
		t.Fatalf("Open on a newer schema = %v, want memory.ErrSchemaTooNew", err)
	}
	var e *contract.SchemaTooNewError
	if !errors.As(err, &e) || e.Version != known+1 || e.Known != known {
		t.Fatalf("Open = %v, want a SchemaTooNewError at %d, known %d", err, known+1, known)
	}
	for _, want := range []string{fmt.Sprintf("%04d", known+1), fmt.Sprintf("%04d", known), "upgrade"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if after := migrationRecords(t, db); len(after) != len(before) {
		t.Errorf("schema_migrations had %d rows, %d after the refused Open", len(before), len(after))
	}
}
