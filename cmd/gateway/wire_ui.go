package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/proxy"
	"github.com/memgate/memgate/internal/savings"
	"github.com/memgate/memgate/internal/server"
	"github.com/memgate/memgate/internal/ui"
)

// newSavings returns the recorder of the savings counters when the store
// keeps them (nil otherwise).
func newSavings(st any, logger *slog.Logger) *savings.Recorder {
	ss, ok := st.(savings.Store)
	if !ok {
		return nil
	}
	return savings.New(ss, savings.DefaultBucket, nil, logger)
}

// recordSavings wraps the proxy's Preparer so the recorder counts every
// memory-on request (rec nil: p unchanged).
func recordSavings(rec *savings.Recorder, p savings.Preparer) savings.Preparer {
	if rec == nil || p == nil {
		return p
	}
	return rec.Wrap(p)
}

// cacheCounter is rec as the proxy's prompt-cache counter (nil when rec
// is: a typed nil would not compare equal to nil).
func cacheCounter(rec *savings.Recorder) proxy.CacheCounter {
	if rec == nil {
		return nil
	}
	return rec
}

// runSavings flushes rec in the background until the returned stop is
// called, which flushes once more and waits (rec nil: nothing to run).
func runSavings(ctx context.Context, rec *savings.Recorder) (stop func()) {
	if rec == nil {
		return func() {}
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		rec.Run(rctx, savings.DefaultFlushEvery)
	}()
	return func() { cancel(); <-done }
}

// registerInspector serves the web inspector (/ui) on srv over the HTTP
// side's collaborators and the savings recorder rec (nil: none); the
// store's optional inspection reads are used when it has them.
func registerInspector(cfg config.Config, d httpDeps, rec *savings.Recorder, srv *server.Server, reg prometheus.Gatherer, logger *slog.Logger) error {
	deps := ui.Deps{
		Guard:    ui.KeyGuard(d.Resolver, adminKeyHash(cfg.AdminKey)),
		Store:    d.Admin,
		Recall:   d.Recall,
		Preparer: d.Preparer,
		Metrics:  reg,
	}
	deps.Inspect, _ = d.Admin.(ui.Inspector)
	if fp, ok := d.Admin.(ui.Footprinter); ok {
		deps.Footprint = fp
	}
	if p, ok := d.Admin.(ui.FactPinner); ok {
		deps.Pinner = p
	}
	if sr, ok := d.Admin.(ui.SavingsReader); ok {
		deps.Savings = sr
	}
	if rec != nil {
		deps.Flush = rec.Flush
	}
	if deps.Inspect == nil {
		logger.Warn("web inspector off: the store cannot be inspected", "store", cfg.Store.Driver)
		return nil
	}
	sh := cfg.Memory.Shares
	u, err := ui.New(deps, ui.Options{
		Shares:        ui.Shares{Summary: sh.Summary, Pinned: sh.Pinned, Facts: sh.Facts, Recall: sh.Recall},
		PreviewModel:  cfg.Compaction.Model,
		SessionTTL:    cfg.Security.SessionIdle.D(),
		SessionMaxAge: cfg.Security.SessionMaxAge.D(),
	}, logger)
	if err != nil {
		return err
	}
	u.Register(srv)
	return nil
}

// adminKeyHash returns the admin key as "sha256:<hex>", the form
// ui.KeyGuard compares: key as configured when it is hashed already, else
// its hash ("" for none).
func adminKeyHash(key string) string {
	if key == "" || strings.HasPrefix(key, "sha256:") {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])
}
