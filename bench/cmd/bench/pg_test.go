package main

import (
	"os"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/testenv"
)

// The gateway environment points at the throwaway database and at a Redis
// prefix of its own.
func TestPGBackendGatewayEnv(t *testing.T) {
	redisURL := testenv.RedisURL(t) // skips under -short
	b, err := newPGBackend(t.Context(), testenv.PostgresBaseURL(), redisURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(t.Context()) })
	env, err := gatewayEnv(b, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	if vars["GATEWAY_STORE"] != "postgres" || vars["GATEWAY_POSTGRES_URL"] != b.DBURL || vars["GATEWAY_REDIS_URL"] != redisURL {
		t.Errorf("gateway environment %v", vars)
	}
	yaml, err := os.ReadFile(vars["GATEWAY_CONFIG"])
	if err != nil || !strings.Contains(string(yaml), "redis_prefix: \""+b.Prefix+"\"") {
		t.Errorf("config file %q (%v) does not set the prefix %q", yaml, err, b.Prefix)
	}
}

func TestPGBackendRejectsBadURL(t *testing.T) {
	if _, err := newPGBackend(t.Context(), "mysql://x", "redis://127.0.0.1:6379/0"); err == nil {
		t.Error("accepted a non-postgres URL")
	}
}
