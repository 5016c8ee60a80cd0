package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/bench/scratch"
)

// newPGBackend creates the memgate-pg gateway's throwaway database and
// Redis prefix (see scratch.New).
func newPGBackend(ctx context.Context, adminURL, redisURL string) (*scratch.Backend, error) {
	b, err := scratch.New(ctx, adminURL, redisURL, "bench")
	if err != nil {
		return nil, fmt.Errorf("%w (set %s and %s, or -postgres-url and -redis-url)", err, postgresEnv, redisEnv)
	}
	return b, nil
}

// gatewayEnv writes the gateway's config file into dir (the Redis prefix has
// no environment variable) and returns the environment selecting the store.
func gatewayEnv(b *scratch.Backend, dir string) ([]string, error) {
	path := filepath.Join(dir, "memgate-pg.yaml")
	yaml := fmt.Sprintf("# written by bench for one run\nstore:\n  redis_prefix: %q\n", b.Prefix)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		return nil, fmt.Errorf("write gateway config: %w", err)
	}
	return []string{
		"GATEWAY_CONFIG=" + path,
		"GATEWAY_STORE=postgres",
		"GATEWAY_POSTGRES_URL=" + b.DBURL,
		"GATEWAY_REDIS_URL=" + b.RedisURL,
	}, nil
}

// analyzeAfterPrefill updates the planner statistics of every PostgreSQL
// database the prefill filled, once the gateways are idle (the prefill's
// enrichment has indexed it). A database in service has been analyzed by
// autovacuum; a throwaway one measured in its first minute has not, and
// PostgreSQL then plans the text search's per-hit item lookups on whichever
// index of (tenant, user) it finds first, scanning the user's items for
// every hit: that is the first minute of a new deployment, not the warm
// conversation the cells measure.
func analyzeAfterPrefill(ctx context.Context, servers map[string]*server, stderr io.Writer) error {
	for _, s := range servers {
		if s.dbURL == "" {
			continue
		}
		if err := settleServers(ctx, servers, stderr); err != nil {
			return err
		}
		conn, err := pgx.Connect(ctx, s.dbURL)
		if err != nil {
			return fmt.Errorf("analyze %s: %w", s.name, err)
		}
		_, err = conn.Exec(ctx, "ANALYZE")
		conn.Close(context.WithoutCancel(ctx))
		if err != nil {
			return fmt.Errorf("analyze %s: %w", s.name, err)
		}
	}
	return nil
}
