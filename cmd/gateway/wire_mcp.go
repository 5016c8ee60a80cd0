package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/labstack/echo/v4"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate/internal/admin"
	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/mcpserver"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
)

// recallService is what the management API and the MCP server need of
// recall: the facts and search of admin.Recall, and search within one
// conversation.
type recallService interface {
	admin.Recall
	mcpserver.Recall
}

// newMCPService returns the MCP tools over the HTTP side's collaborators
// (the management API's), with the store's optional pinning and summary
// history when it has them, as the inspector takes them.
func newMCPService(cfg config.Config, d httpDeps, logger *slog.Logger) *mcpserver.Service {
	deps := mcpserver.Deps{Store: d.Admin, Preparer: d.Preparer}
	if d.Recall != nil {
		deps.Recall = d.Recall
	}
	if p, ok := d.Admin.(mcpserver.Pinner); ok {
		deps.Pinner = p
	}
	if s, ok := d.Admin.(mcpserver.Summaries); ok {
		deps.Summaries = s
	}
	return mcpserver.New(deps, mcpserver.Options{Version: buildVersion(), PreviewModel: cfg.Compaction.Model}, logger)
}

// registerMCP serves the MCP streamable HTTP transport on /mcp (route
// "mcp" in metrics and logs), behind the management API's key rule and
// its edge guards: the failed-key limiter, and the browser guard when no
// key protects the management API.
func registerMCP(cfg config.Config, d httpDeps, e edge, srv *server.Server, logger *slog.Logger) {
	if d.Admin == nil {
		return
	}
	var resolver mcpserver.IdentityResolver = identity.New(nil)
	if d.Resolver != nil {
		resolver = d.Resolver
	}
	h := newMCPService(cfg, d, logger).Handler(resolver, cfg.MaxBodyBytes)
	srv.Echo().Any("/mcp", echo.WrapHandler(h), srv.Route("mcp"), e.limiter.Middleware(nil), e.manage.Middleware(true, nil))
}

// mcpStdio runs `gateway mcp`: the MCP server over stdin and stdout for a
// local client (Claude Desktop, an IDE) that starts the command itself. It
// opens the configured store directly, so whoever can run it with the
// gateway's configuration reads and changes memory as the admin key
// would; the tenant is the -tenant flag (the default tenant without it).
// Logs go to logw (stderr); stdout carries the protocol only.
func mcpStdio(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, logw io.Writer) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(logw)
	tenant := fs.String("tenant", memory.DefaultTenant, "the tenant whose memory the tools act on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("mcp: unexpected argument %q", fs.Arg(0))
	}
	if !memory.ValidID(*tenant) {
		return fmt.Errorf("mcp: -tenant must be 1-128 characters of [A-Za-z0-9._:@-]: %w", memory.ErrInvalid)
	}
	cfg, logger, mem, err := start(ctx, getenv, logw)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
		defer cancel()
		if err := mem.shutdown(sctx); err != nil {
			logger.Error("close store", "error", err)
		}
	}()
	srv := newMCPService(cfg, mem.deps(cfg), logger).Server(*tenant)
	logger.Info("mcp over stdio", "store", cfg.Store.Driver, "version", buildVersion())
	err = srv.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}})
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) || errors.Is(err, mcp.ErrConnectionClosed) {
		return nil
	}
	return fmt.Errorf("mcp: %w", err)
}

// nopWriteCloser is stdout, which the protocol's end leaves open.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
