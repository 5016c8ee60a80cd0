package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/testenv"
	pgmigrations "github.com/memgate/memgate/migrations/postgres"
	sqlitemigrations "github.com/memgate/memgate/migrations/sqlite"
)

func TestMigrateCommand(t *testing.T) {
	tests := map[string]map[string]string{
		"sqlite":   {"GATEWAY_SQLITE_PATH": filepath.Join(t.TempDir(), "m.db")},
		"postgres": {"GATEWAY_STORE": "postgres", "GATEWAY_POSTGRES_URL": testenv.PostgresURL(t)},
	}
	for name, env := range tests {
		t.Run(name, func(t *testing.T) {
			for range 2 { // idempotent
				var out, logs bytes.Buffer
				err := run(context.Background(), []string{"gateway", "migrate"}, func(k string) string { return env[k] }, strings.NewReader(""), &out, &logs)
				if err != nil {
					t.Fatalf("migrate: %v\n%s", err, logs.String())
				}
				if !strings.Contains(out.String(), "migrations applied to the "+env["GATEWAY_STORE"]) && name == "postgres" {
					t.Fatalf("output %q", out.String())
				}
			}
		})
	}
	var out, logs bytes.Buffer
	err := run(context.Background(), []string{"gateway", "migrate"}, func(k string) string {
		return map[string]string{"GATEWAY_STORE": "postgres", "GATEWAY_POSTGRES_URL": "postgres://postgres@127.0.0.1:1/x?connect_timeout=1"}[k]
	}, strings.NewReader(""), &out, &logs)
	if err == nil {
		t.Fatal("migrate against an unreachable database succeeded")
	}
}

// readySink cancels a command's context at its first line saying it is
// running (serve's "listening", the worker's, mcp's), so a command that
// starts against a schema it should refuse returns instead of serving.
type readySink struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	cancel context.CancelFunc
}

func (s *readySink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	for _, ready := range []string{`"msg":"listening"`, `"msg":"capture worker running"`, `"msg":"mcp over stdio"`} {
		if bytes.Contains(p, []byte(ready)) {
			s.cancel()
		}
	}
	return len(p), nil
}

func (s *readySink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// TestCommandsRefuseNewerSchema migrates a database, records one more
// migration than this build knows (as a newer build would), and checks that
// every command that opens the store fails (main exits 1 on run's error)
// with an error naming both versions and saying to upgrade.
func TestCommandsRefuseNewerSchema(t *testing.T) {
	ctx := context.Background()
	newest := func(fsys fs.FS) int {
		names, err := fs.Glob(fsys, "*.sql")
		if err != nil || len(names) == 0 {
			t.Fatalf("migrations: %v %v", names, err)
		}
		slices.Sort(names)
		v, err := strconv.Atoi(strings.SplitN(names[len(names)-1], "_", 2)[0])
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	stores := []struct {
		name  string
		env   map[string]string
		known int
		// newer records migration v in the migrated database.
		newer    func(t *testing.T, v int)
		commands []string
	}{
		{name: "sqlite", env: map[string]string{"GATEWAY_SQLITE_PATH": filepath.Join(t.TempDir(), "m.db")},
			known: newest(sqlitemigrations.FS), commands: []string{"migrate", "serve", "worker", "reindex", "mcp"}},
		{name: "postgres", env: map[string]string{"GATEWAY_STORE": "postgres", "GATEWAY_POSTGRES_URL": testenv.PostgresURL(t)},
			known: newest(pgmigrations.FS), commands: []string{"migrate", "serve", "mcp"}},
	}
	stores[0].newer = func(t *testing.T, v int) {
		db, err := sql.Open("sqlite", "file:"+stores[0].env["GATEWAY_SQLITE_PATH"]+"?_busy_timeout=10000")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'newer.sql', 0)`, v); err != nil {
			t.Fatal(err)
		}
	}
	stores[1].newer = func(t *testing.T, v int) {
		conn, err := pgx.Connect(ctx, stores[1].env["GATEWAY_POSTGRES_URL"])
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", fmt.Sprintf("%04d_newer", v)); err != nil {
			t.Fatal(err)
		}
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			st.env["GATEWAY_LISTEN"] = "127.0.0.1:0"
			st.env["GATEWAY_EMBEDDINGS_PROVIDER"] = "local"
			var out bytes.Buffer
			if err := run(ctx, []string{"gateway", "migrate"}, env(st.env), strings.NewReader(""), &out, io.Discard); err != nil {
				t.Fatalf("first migrate: %v", err)
			}
			st.newer(t, st.known+1)
			for _, cmd := range st.commands {
				t.Run(cmd, func(t *testing.T) {
					cctx, cancel := context.WithCancel(ctx)
					defer cancel()
					logs := &readySink{cancel: cancel}
					err := run(cctx, []string{"gateway", cmd}, env(st.env), strings.NewReader(""), io.Discard, logs)
					if !errors.Is(err, memory.ErrSchemaTooNew) {
						t.Fatalf("%s on a newer schema = %v, want memory.ErrSchemaTooNew\n%s", cmd, err, logs)
					}
					for _, want := range []string{fmt.Sprintf("%04d", st.known+1), fmt.Sprintf("%04d", st.known), "upgrade this binary"} {
						if !strings.Contains(err.Error(), want) {
							t.Errorf("error %q does not say %q", err, want)
						}
					}
				})
			}
		})
	}
}
