package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// migrate applies the configured store's migrations and exits. Opening a
// store applies them (each in a transaction, serialized across replicas), so
// this is the store opened and closed again.
func migrate(ctx context.Context, getenv func(string) string, stdout, logw io.Writer) error {
	cfg, logger, err := setup(getenv, logw)
	if err != nil {
		return err
	}
	st, _, closers, err := openStore(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()
	if err := st.Ping(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	fmt.Fprintf(stdout, "migrations applied to the %s store\n", cfg.Store.Driver)
	return nil
}

// healthcheck asks the local gateway's /healthz, for container health checks
// in images without curl. It exits non-zero unless the answer is 200.
func healthcheck(ctx context.Context, getenv func(string) string) error {
	cfg, _, err := setup(getenv, io.Discard)
	if err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %q: %w", cfg.Listen, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port)+"/healthz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: status %d", resp.StatusCode)
	}
	return nil
}
