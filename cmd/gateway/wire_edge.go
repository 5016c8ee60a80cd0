package main

import (
	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/server"
)

// maxLimitedClients bounds the clients the failed-key limiter remembers.
const maxLimitedClients = 10_000

// edge are the guards in front of the gateway's routes.
type edge struct {
	// chat guards the /v1 routes (chat with memory, pass-through) against
	// web pages; nil when gateway keys protect them.
	chat *server.BrowserGuard
	// manage guards the management API and the inspector; nil when the
	// admin key or gateway keys protect them.
	manage *server.BrowserGuard
	// limiter bounds refused keys and logins per client.
	limiter *server.FailureLimiter
}

// newEdge returns the guards cfg asks for: the browser guard on every
// surface no key protects, and the failed-key limiter everywhere.
func newEdge(cfg config.Config) edge {
	sec := cfg.Security
	g := server.NewBrowserGuard(cfg.Listen, sec.AllowedHosts, sec.AllowedOrigins)
	e := edge{limiter: server.NewFailureLimiter(sec.FailedAuthBurst, sec.FailedAuthRefill.D(), maxLimitedClients, nil)}
	if len(cfg.Keys) == 0 {
		e.chat = g
		if cfg.AdminKey == "" {
			e.manage = g
		}
	}
	return e
}

// register puts the guards in front of the management API (JSON bodies)
// and the inspector (its forms carry CSRF tokens); the proxy applies its
// own (proxy.Deps) in each route's error shape.
func (e edge) register(srv *server.Server) {
	srv.UsePrefix("/v1/memory", e.limiter.Middleware(nil), e.manage.Middleware(true, nil))
	srv.UsePrefix("/ui", e.limiter.Middleware(nil), e.manage.Middleware(false, nil))
}
