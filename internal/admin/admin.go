// Package admin serves memgate's memory management API: conversations,
// facts, search, the assembly preview and erasure, under /v1/memory. Every
// call is scoped to the caller's tenant (checked against the gateway key
// when keys are configured) and answers errors in OpenAI's shape.
package admin

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
)

// IdentityResolver decides who may call the management API and for which
// tenant, and reads a preview's identity (implemented by internal/identity).
type IdentityResolver interface {
	// ResolveAdmin returns the caller's tenant, or why it may not call;
	// remoteAddr is the TCP peer.
	ResolveAdmin(h http.Header, remoteAddr string) (string, error)
	// ResolveFor reads the user, conversation and mode for tenant.
	ResolveFor(tenant string, h http.Header, bodyUser string) (memory.Identity, memory.Mode, error)
}

// Preparer assembles the messages a chat request would send, in the
// conversation it would go to (implemented by internal/engine).
type Preparer interface {
	Prepare(ctx context.Context, req memory.Request) (memory.Prepared, error)
	// Route returns the branch of the conversation id.Conversation,
	// derived from the history msgs resend, that the history continues,
	// or the conversation whose tail a cut history continues (see
	// engine.Engine.Route; cut is msgs' memory.Cut), with the user's
	// revision counters it read (nil: none; a preview reads its own); it
	// never fails.
	Route(ctx context.Context, id memory.Identity, msgs []memory.Message, cut memory.Cut) memory.Routed
}

// ImpliedConversation is the conversation a memory-on request naming none
// goes to, as the chat routes place it: memory.ImpliedConversation, and,
// when that was derived from the history msgs resend, the branch of it
// (or the conversation a cut history continues) p routes the request to, comparing what a chat request's exchange would
// store of msgs (memory.CutRequest with keep, capture.max_history_messages).
func ImpliedConversation(ctx context.Context, p Preparer, id memory.Identity, msgs []memory.Message, keep int) string {
	id.Conversation = memory.ImpliedConversation(id.Tenant, id.User, msgs)
	if id.Conversation == memory.DefaultConversation {
		return id.Conversation
	}
	if routed := p.Route(ctx, id, msgs, memory.CutRequest(msgs, keep)); routed.Conversation != "" {
		return routed.Conversation
	}
	return id.Conversation
}

// Admin serves the management API.
type Admin struct {
	resolver IdentityResolver
	store    Store
	recall   Recall
	preparer Preparer
	maxBody  int64
	keep     int // capture.max_history_messages
	log      *slog.Logger
}

// New returns the management API over its collaborators; any of resolver,
// store, recall and preparer may be nil (no resolver: no key opens it, and
// it answers loopback clients only, for the default tenant; the routes of a
// missing collaborator answer 503). maxBody caps a preview's body, as it
// caps a chat request's; a preview is routed as a chat request whose
// exchange stores keep newest messages of its resent history
// (capture.max_history_messages; 0: all).
func New(resolver IdentityResolver, store Store, recall Recall, preparer Preparer, maxBody int64, keep int, logger *slog.Logger) *Admin {
	if resolver == nil {
		resolver = identity.New(nil)
	}
	return &Admin{resolver: resolver, store: store, recall: recall, preparer: preparer, maxBody: maxBody, keep: keep, log: logger}
}

// Register adds the management routes to srv. Every one of them is guarded
// (see guard).
func (a *Admin) Register(srv *server.Server) {
	e, admin := srv.Echo(), srv.Route("memory_admin")
	e.POST("/v1/memory/preview", a.handlePreview, srv.Route("preview"), a.guard)
	e.GET("/v1/memory/conversations", a.handleListConversations, admin, a.guard)
	e.GET("/v1/memory/conversations/:id", a.handleGetConversation, admin, a.guard)
	e.DELETE("/v1/memory/conversations/:id", a.handleDeleteConversation, admin, a.guard)
	e.DELETE("/v1/memory/users/:user", a.handleDeleteUser, admin, a.guard)
	e.GET("/v1/memory/users/:user/facts", a.handleListFacts, admin, a.guard)
	e.POST("/v1/memory/users/:user/facts", a.handleAddFact, admin, a.guard)
	e.DELETE("/v1/memory/users/:user/facts/:id", a.handleDeleteFact, admin, a.guard)
	e.POST("/v1/memory/search", a.handleSearch, admin, a.guard)
}

// tenantKey carries the tenant guard decided on.
type tenantKey struct{}

// guard lets a management call through only with the admin key, a gateway
// key (for its tenant), or — no key configured at all — from a loopback
// peer; the others get 401 or 403 and nothing is read.
func (a *Admin) guard(next echo.HandlerFunc) echo.HandlerFunc { return guardWith(a.resolver)(next) }

// guardWith is the management routes' guard over resolver.
func guardWith(resolver IdentityResolver) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			tenant, err := resolver.ResolveAdmin(r.Header, r.RemoteAddr)
			if err != nil {
				aerr := identity.APIError(err)
				if identity.Refused(err) {
					// Counted by the failed-key limiter in front.
					server.ExchangeOf(r.Context()).AuthFailed()
				}
				return aerr
			}
			c.SetRequest(r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenant)))
			return next(c)
		}
	}
}

// tenantOf returns the tenant guard decided on for r.
func tenantOf(r *http.Request) string {
	if t, ok := r.Context().Value(tenantKey{}).(string); ok {
		return t
	}
	return memory.DefaultTenant
}

// Where a route takes its user, as a blank one's 400 names it.
const (
	userInQuery = "The user query parameter"
	userInPath  = "The user in the path"
	userInBody  = "The body's user member"
)

// scope returns the caller's tenant (decided by guard) and the user the
// request addresses, taken from where (userInQuery, userInPath,
// userInBody).
func (a *Admin) scope(r *http.Request, user, where string) (memory.Identity, *apierr.Error) {
	return scopeOf(r, user, where)
}

// scopeOf is scope for any guarded route. The user is an id, or the
// value an app sent in a body's user field: it names the user that value
// names on the chat routes (memory.BodyUserID: itself when an id, else
// its digest), so an operator can name a user stored under a digest by
// the app's own value ("John Smith"); the answers name the id. An id,
// a digest's ("u-…") included, names itself: the operator names the user
// the inspector shows. A blank
// value names no user there, and is refused here.
func scopeOf(r *http.Request, user, where string) (memory.Identity, *apierr.Error) {
	id := memory.NamedUserID(user)
	if id == "" {
		return memory.Identity{}, apierr.Invalid("user", where+" is required (blank names no user).")
	}
	return memory.Identity{Tenant: tenantOf(r), User: id}, nil
}
