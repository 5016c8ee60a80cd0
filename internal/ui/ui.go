// Package ui serves memgate's built-in web inspector under /ui: a tenant's
// users and conversations (live messages, superseded branches, every summary
// version), a user's facts with their history (pin, unpin, delete), what the
// model would see for a typed question, savings and health, and erasing a
// user. Pages are server-rendered html/template with a little progressive
// JavaScript; every asset is embedded, nothing is fetched from elsewhere.
//
// Access is checked by a Guard — the management API's key rule — on every
// request; the key an operator enters once is kept server-side in a session
// whose id travels in an HttpOnly, SameSite=Strict cookie, and every form
// that changes memory carries the session's CSRF token.
package ui

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/admin"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Inspector is what the pages read of the store beyond the management API's
// admin.Store.
type Inspector interface {
	// Users lists a tenant's users whose id contains match, most recently
	// active first, at most limit.
	Users(ctx context.Context, tenant, match string, limit int) ([]memory.UserActivity, error)
	// Branches returns a conversation's superseded messages, by the moment
	// they left the live branch.
	Branches(ctx context.Context, id memory.Identity, limit int) ([]memory.Branch, error)
	// Summaries returns every summary version of a conversation, oldest first.
	Summaries(ctx context.Context, id memory.Identity) ([]memory.Summary, error)
}

// Footprinter counts what is stored about a user.
type Footprinter interface {
	Footprint(ctx context.Context, tenant, user string) (memory.Footprint, error)
}

// FactPinner pins and unpins a current fact (memory.ErrNotFound when the
// user has no current fact with that id).
type FactPinner interface {
	SetFactPinned(ctx context.Context, tenant, user string, id int64, pinned bool) error
}

// SavingsReader reads the stored savings counters of a tenant.
type SavingsReader interface {
	Savings(ctx context.Context, tenant string, since time.Time) ([]memory.SavingsBucket, error)
}

// Deps are the inspector's collaborators. Guard, Store and Inspect are
// required; the pages of a missing optional one say it is not configured.
type Deps struct {
	// Guard checks the operator's key on every request.
	Guard Guard
	// Store lists and reads conversations and erases users (the management
	// API's store).
	Store admin.Store
	// Inspect reads users, superseded branches and summary history.
	Inspect Inspector
	// Footprint counts what is left of a user (after erasure).
	Footprint Footprinter
	// Recall lists, adds and deletes facts (nil when recall is off).
	Recall admin.Recall
	// Pinner pins and unpins facts.
	Pinner FactPinner
	// Preparer assembles what the model would see (the preview route's).
	Preparer admin.Preparer
	// Savings reads the stored savings counters; Flush, when set, stores
	// this process's pending counts first, so the chart is current.
	Savings SavingsReader
	Flush   func(ctx context.Context) error
	// Metrics is the gateway's Prometheus registry, for the health panel.
	Metrics prometheus.Gatherer
}

// Options tune the inspector.
type Options struct {
	// Shares are the budget shares of the memory parts (memory.shares), drawn
	// as marks on the preview's budget bar.
	Shares Shares
	// PreviewModel is the model a preview assumes when the form names none.
	PreviewModel string
	// MaxHistory is capture.max_history_messages: a preview is routed as a
	// chat request whose exchange stores that many newest messages of its
	// resent history (admin.ImpliedConversation; 0: all).
	MaxHistory int
	// SessionTTL is how long a session lives without use (default 8h).
	SessionTTL time.Duration
	// SessionMaxAge is how long a session lives after login, however much
	// it is used (default 12h).
	SessionMaxAge time.Duration
	// Now is the clock sessions are timed by (default time.Now).
	Now func() time.Time
}

// Shares are the fractions of the budget each memory part may take.
type Shares struct {
	Summary, Pinned, Facts, Recall float64
}

// UI is the web inspector.
type UI struct {
	deps     Deps
	opts     Options
	log      *slog.Logger
	pages    map[string]*template.Template
	sessions *sessions
	static   http.Handler
}

// New returns the inspector. It fails when a template does not parse.
func New(deps Deps, opts Options, logger *slog.Logger) (*UI, error) {
	if deps.Guard == nil || deps.Store == nil || deps.Inspect == nil {
		return nil, fmt.Errorf("ui: Guard, Store and Inspect are required")
	}
	if opts.PreviewModel == "" {
		opts.PreviewModel = "gpt-4o-mini"
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = 8 * time.Hour
	}
	if opts.SessionMaxAge <= 0 {
		opts.SessionMaxAge = 12 * time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, fmt.Errorf("ui: static assets: %w", err)
	}
	return &UI{
		deps: deps, opts: opts, log: logger, pages: pages,
		sessions: newSessions(opts.SessionTTL, opts.SessionMaxAge, maxSessions, opts.Now),
		static:   http.StripPrefix("/ui/static/", http.FileServer(http.FS(sub))),
	}, nil
}

// Register adds the /ui routes to srv.
func (u *UI) Register(srv *server.Server) {
	g := srv.Echo().Group("/ui", srv.Route("ui"), u.secureHeaders, u.formBody)
	g.GET("", u.redirect("/ui/users"))
	g.GET("/", u.redirect("/ui/users"))
	g.GET("/static/*", echo.WrapHandler(u.static))
	g.GET("/login", u.handleLoginForm)
	g.POST("/login", u.handleLogin)
	g.POST("/logout", u.handleLogout, u.authed, u.csrf)

	g.GET("/users", u.handleUsers, u.authed)
	g.GET("/users.json", u.handleUsersJSON, u.authedJSON)
	g.GET("/users/:user", u.handleUser, u.authed)
	g.GET("/users/:user/conversations/:id", u.handleConversation, u.authed)
	g.GET("/users/:user/facts", u.handleFacts, u.authed)
	g.POST("/users/:user/facts/:id/pin", u.handlePin(true), u.authed, u.csrf)
	g.POST("/users/:user/facts/:id/unpin", u.handlePin(false), u.authed, u.csrf)
	g.POST("/users/:user/facts/:id/delete", u.handleDeleteFact, u.authed, u.csrf)
	g.GET("/users/:user/preview", u.handlePreview, u.authed)
	g.POST("/users/:user/erase", u.handleErase, u.authed, u.csrf)
	g.GET("/users/:user/erased", u.handleErased, u.authed)
	g.GET("/savings", u.handleSavings, u.authed)
}

// redirect answers with a 303 to path.
func (u *UI) redirect(path string) echo.HandlerFunc {
	return func(c echo.Context) error { return c.Redirect(http.StatusSeeOther, path) }
}

// secureHeaders sets the headers every inspector response carries: no
// caching, no framing, no inline script or style, no referrer to other
// sites (a same-origin one, so the browser sends Origin on form posts).
func (u *UI) secureHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		if c.Request().URL.Path != "" && !isStatic(c.Request().URL.Path) {
			h.Set("Cache-Control", "no-store")
		}
		return next(c)
	}
}

// Bounds of a form post: the inspector's forms hold a key, a CSRF token
// and a user id, URL-encoded.
const (
	maxFormBytes    = 64 << 10
	formReadTimeout = 60 * time.Second
)

// formBody reads a POST's form before any handler or guard does: the
// URL-encoded body the inspector's forms send, up to maxFormBytes and
// within formReadTimeout. Any other body is refused unread (a multipart
// one's files would be spooled to disk, without limit, by the first
// FormValue), and so is a larger one: the login form is open to whoever
// reaches the port.
func (u *UI) formBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.Method != http.MethodPost {
			return next(c)
		}
		if ct := r.Header.Get("Content-Type"); ct != "" {
			if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/x-www-form-urlencoded" {
				return u.renderError(c, http.StatusUnsupportedMediaType, "The inspector takes its own forms only.")
			}
		}
		rc := http.NewResponseController(c.Response())
		_ = rc.SetReadDeadline(time.Now().Add(formReadTimeout)) // not every writer has one (tests')
		r.Body = http.MaxBytesReader(c.Response(), r.Body, maxFormBytes)
		err := r.ParseForm()
		// Lifted once the form is read, not after the handler: net/http
		// then reads the connection in the background, and a deadline
		// passing there would cancel a long erasure's context.
		_ = rc.SetReadDeadline(time.Time{})
		if err != nil {
			var mb *http.MaxBytesError
			if errors.As(err, &mb) {
				return u.renderError(c, http.StatusRequestEntityTooLarge, "The form is larger than the inspector's forms.")
			}
			return u.renderError(c, http.StatusBadRequest, "The form could not be read.")
		}
		return next(c)
	}
}

// isStatic reports whether path names an embedded asset.
func isStatic(path string) bool {
	return len(path) > len("/ui/static/") && path[:len("/ui/static/")] == "/ui/static/"
}
