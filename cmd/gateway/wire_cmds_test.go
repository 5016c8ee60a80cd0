package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/testenv"
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
