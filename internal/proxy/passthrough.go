package proxy

import (
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/server"
)

// handlePassthrough returns the handler of the /v1 routes the gateway does
// not own for API a: through the reverse proxy to a's upstream, after
// checking the gateway key when keys are configured (errors in a's shape).
//
// With gateway keys the route must also be allow-listed (allowedRoute):
// the upstream request carries the operator's provider key, so a route
// that reads or changes what is stored at the provider (stored chat
// completions and responses, files, batches, fine-tunes, vector stores)
// would let one tenant reach every tenant's data there.
func (p *Proxy) handlePassthrough(a *api) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		var tenant string
		if p.requireKey() {
			id, _, aerr := p.identify(r, "")
			if aerr != nil {
				a.writeError(c.Response(), aerr)
				return nil
			}
			tenant = id.Tenant
			if !p.allowedRoute(r) {
				a.writeError(c.Response(), &apierr.Error{Status: http.StatusForbidden, Type: apierr.TypePermission, Code: "route_not_allowed",
					Message: "This gateway does not forward " + r.Method + " " + r.URL.Path + ": provider routes beyond chat, messages, responses, embeddings and models reach data every tenant shares; the operator may allow it in security.passthrough."})
				return nil
			}
		}
		f := &forward{x: server.ExchangeOf(r.Context()), api: a, tenant: tenant}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = clientBody{ReadCloser: r.Body, f: f}
		}
		p.rp.ServeHTTP(newFinalWriter(c.Response()), withForward(r, f))
		return nil
	}
}

// routeRule is one allow-listed passthrough route.
type routeRule struct {
	method, path string
	// prefix: path ended in "*", matching any rest.
	prefix bool
}

// parseRoutes reads "METHOD /path" rules, a trailing "*" matching any rest.
func parseRoutes(routes []string) ([]routeRule, error) {
	rules := make([]routeRule, 0, len(routes))
	for _, s := range routes {
		m, p, ok := strings.Cut(strings.TrimSpace(s), " ")
		p = strings.TrimSpace(p)
		if !ok || m == "" || !strings.HasPrefix(p, "/") {
			return nil, fmt.Errorf("%q is not \"METHOD /path\"", s)
		}
		r := routeRule{method: strings.ToUpper(m), path: p}
		if rest, ok := strings.CutSuffix(p, "*"); ok {
			r.path, r.prefix = rest, true
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// allowedRoute reports whether a request's method and path are
// allow-listed. A path that is not in clean form ("..", ".", "//", a
// trailing slash) or escapes a slash, a dot or a backslash is never
// allowed: the upstream, or a proxy before it, could read it as another
// route than the one matched here.
func (p *Proxy) allowedRoute(r *http.Request) bool {
	pth := r.URL.Path
	if pth == "" || path.Clean(pth) != pth {
		return false
	}
	if raw := strings.ToLower(r.URL.RawPath); raw != "" &&
		(strings.Contains(raw, "%2f") || strings.Contains(raw, "%2e") || strings.Contains(raw, "%5c")) {
		return false
	}
	if strings.Contains(pth, `\`) {
		return false
	}
	for _, rule := range p.allowed {
		if rule.method != r.Method {
			continue
		}
		if rule.prefix && strings.HasPrefix(pth, rule.path) && len(pth) > len(rule.path) || !rule.prefix && pth == rule.path {
			return true
		}
	}
	return false
}
