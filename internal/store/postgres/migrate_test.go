package postgres

import (
	"fmt"
	"testing"

	"github.com/memgate/memgate/internal/store/storetest"
	"github.com/memgate/memgate/internal/testenv"
	migrations "github.com/memgate/memgate/migrations/postgres"
)

// TestOpenRefusesNewerSchema records a migration beyond this build's last,
// as a newer build would, and checks that Open refuses the database,
// naming both versions.
func TestOpenRefusesNewerSchema(t *testing.T) {
	known := storetest.NewestMigration(t, migrations.FS)
	url := testenv.PostgresURL(t)
	s := mustOpenURL(t, url)
	if _, err := s.pool.Exec(testCtx(t), "INSERT INTO schema_migrations (version) VALUES ($1)",
		fmt.Sprintf("%04d_from_a_newer_build", known+1)); err != nil {
		t.Fatal(err)
	}

	_, err := Open(testCtx(t), url, nil)
	storetest.CheckSchemaTooNew(t, err, known)
}
