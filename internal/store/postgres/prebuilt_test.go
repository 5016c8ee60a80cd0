package postgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/store/contract"
	"github.com/memgate/memgate/internal/testenv"
	migrations "github.com/memgate/memgate/migrations/postgres"
)

// TestMigrationKeepsAPrebuiltSupersededIndex: an operator who built
// messages_superseded with CREATE INDEX CONCURRENTLY before upgrading
// (README, Upgrading to migration 0037: writes do not wait on it) can
// still migrate. Before, 0037 failed: the index already existed.
func TestMigrationKeepsAPrebuiltSupersededIndex(t *testing.T) {
	ctx := testCtx(t)
	url := testenv.PostgresURL(t)
	conn := migrateBefore(t, url, 37)
	if _, err := conn.Exec(ctx, `CREATE INDEX CONCURRENTLY messages_superseded ON messages (tenant, user_id, conversation, superseded_at, seq)
		WHERE superseded_at IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, url, nil)
	if err != nil {
		t.Fatalf("Open after the index was built beforehand: %v", err)
	}
	defer s.Close()
	var done bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version LIKE '0037%')`).Scan(&done); err != nil || !done {
		t.Fatalf("0037 applied: %v, %v", done, err)
	}
}

// migrateBefore applies the migrations before version to the database at
// url, as a build of that time did, and returns a connection to it (closed
// when the test ends).
func migrateBefore(t *testing.T, url string, version int) *pgx.Conn {
	t.Helper()
	ctx := testCtx(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.WithoutCancel(ctx)) })
	ms, err := contract.Migrations(migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TABLE schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Version >= version {
			break
		}
		if _, err := conn.Exec(ctx, m.SQL); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, m.Name); err != nil {
			t.Fatal(err)
		}
	}
	return conn
}
