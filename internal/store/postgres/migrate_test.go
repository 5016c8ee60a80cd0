package postgres

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
	"github.com/memgate/memgate/internal/testenv"
	migrations "github.com/memgate/memgate/migrations/postgres"
)

// TestOpenRefusesNewerSchema records a migration beyond this build's last,
// as a newer build would, and checks that Open refuses the database,
// naming both versions.
func TestOpenRefusesNewerSchema(t *testing.T) {
	ms, err := contract.Migrations(migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	known := ms[len(ms)-1].Version
	url := testenv.PostgresURL(t)
	s := mustOpenURL(t, url)
	if _, err := s.pool.Exec(testCtx(t), "INSERT INTO schema_migrations (version) VALUES ($1)",
		fmt.Sprintf("%04d_from_a_newer_build", known+1)); err != nil {
		t.Fatal(err)
	}

	_, err = Open(testCtx(t), url, nil)
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
}
