// Package admin serves memgate's memory management API: conversations,
// facts, search, the assembly preview and erasure, under /v1/memory. Every
// call is scoped to the caller's tenant (checked against the gateway key
// when keys are configured) and answers errors in OpenAI's shape.
package admin

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
)

// IdentityResolver maps a request to its identity and memory mode
// (implemented by internal/auth).
type IdentityResolver interface {
	Resolve(h http.Header, bodyUser string) (memory.Identity, memory.Mode, error)
}

// Preparer assembles the messages a chat request would send (implemented
// by internal/inject).
type Preparer interface {
	Prepare(ctx context.Context, req memory.Request) (memory.Prepared, error)
}

// Admin serves the management API.
type Admin struct {
	resolver IdentityResolver
	store    Store
	recall   Recall
	preparer Preparer
	maxBody  int64
	log      *slog.Logger
}

// New returns the management API over its collaborators; any of resolver,
// store, recall and preparer may be nil (no resolver: every caller is the
// default tenant; the routes of a missing collaborator answer 503).
// maxBody caps a preview's body, as it caps a chat request's.
func New(resolver IdentityResolver, store Store, recall Recall, preparer Preparer, maxBody int64, logger *slog.Logger) *Admin {
	return &Admin{resolver: resolver, store: store, recall: recall, preparer: preparer, maxBody: maxBody, log: logger}
}

// Register adds the management routes to srv.
func (a *Admin) Register(srv *server.Server) {
	e, admin := srv.Echo(), srv.Route("memory_admin")
	e.POST("/v1/memory/preview", a.handlePreview, srv.Route("preview"))
	e.GET("/v1/memory/conversations", a.handleListConversations, admin)
	e.GET("/v1/memory/conversations/:id", a.handleGetConversation, admin)
	e.DELETE("/v1/memory/conversations/:id", a.handleDeleteConversation, admin)
	e.DELETE("/v1/memory/users/:user", a.handleDeleteUser, admin)
	e.GET("/v1/memory/users/:user/facts", a.handleListFacts, admin)
	e.POST("/v1/memory/users/:user/facts", a.handleAddFact, admin)
	e.DELETE("/v1/memory/users/:user/facts/:id", a.handleDeleteFact, admin)
	e.POST("/v1/memory/search", a.handleSearch, admin)
}

// scope resolves the caller's tenant (checking the gateway key when keys
// are configured) and the user the request addresses.
func (a *Admin) scope(r *http.Request, user string) (memory.Identity, *apierr.Error) {
	return resolveScope(a.resolver, r, user)
}

// resolveScope is scope with resolver (nil: every caller is the default
// tenant).
func resolveScope(resolver IdentityResolver, r *http.Request, user string) (memory.Identity, *apierr.Error) {
	h := r.Header.Clone()
	// Identity headers that address memory are taken from the URL here.
	h.Del("X-Memory-User")
	h.Del("X-Memory-Conversation")
	h.Del("X-Memory-Mode")
	tenant := memory.DefaultTenant
	if resolver != nil {
		id, _, err := resolver.Resolve(h, "")
		if err != nil {
			return memory.Identity{}, apierr.FromIdentity(err)
		}
		tenant = id.Tenant
	}
	if user == "" {
		return memory.Identity{}, apierr.Invalid("user", "The user query parameter is required.")
	}
	if !memory.ValidID(user) {
		return memory.Identity{}, apierr.Invalid("user", "user must be 1-128 characters of [A-Za-z0-9._:@-].")
	}
	return memory.Identity{Tenant: tenant, User: user}, nil
}
