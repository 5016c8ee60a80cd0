package server

import (
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/apierr"
)

// ErrorWriter writes a gateway error in a route's error shape (OpenAI's,
// or Anthropic's on /v1/messages).
type ErrorWriter func(w http.ResponseWriter, e *apierr.Error)

// BrowserGuard refuses the requests a web page could make to a route that
// no key protects: the page's own script (a cross-site request) or the
// gateway reached under the page's own name (DNS rebinding). A nil
// *BrowserGuard lets every request through, which is what a route that a
// key protects wants: a page cannot attach the key.
//
// It refuses, in this order:
//   - a Host that is none of: the configured listen host, a loopback name
//     (localhost, *.localhost), an IP literal (a rebinding page is always
//     served under a name), or an allow-listed name;
//   - an Origin other than the request's own host or an allow-listed
//     origin ("null" included); without Origin, Sec-Fetch-Site: cross-site
//     except on a top-level GET navigation, which cannot read the answer;
//   - on JSON routes, a POST, PUT or PATCH body declared as anything but
//     application/json (or +json): a page can send text/plain, a form or
//     multipart across sites without asking, but not JSON. A body with no
//     Content-Type passes (scripts and some clients send none; a browser
//     always sends Origin with a POST, which the rule above checks).
//
// SDKs send application/json and no Origin; the inspector's own forms send
// their own origin.
type BrowserGuard struct {
	names    map[string]bool
	suffixes []string
	origins  map[string]bool
}

// NewBrowserGuard returns the guard for a gateway listening on listen
// ("host:port"; an empty or wildcard host adds no name), the allow-listed
// host names (exact, or ".example.com" for every name under it; ports are
// ignored) and origins ("https://app.example.com[:port]").
func NewBrowserGuard(listen string, hosts, origins []string) *BrowserGuard {
	g := &BrowserGuard{names: map[string]bool{"localhost": true}, origins: map[string]bool{}}
	if h := hostName(listen); h != "" {
		g.names[h] = true
	}
	for _, h := range hosts {
		h = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
		switch {
		case h == "":
		case strings.HasPrefix(h, "."):
			g.suffixes = append(g.suffixes, h)
		default:
			g.names[hostName(h)] = true
		}
	}
	for _, o := range origins {
		if o = normalOrigin(o); o != "" {
			g.origins[o] = true
		}
	}
	return g
}

// Check returns the error a browser-reachable request gets, or nil when it
// may proceed. jsonBody marks a route whose bodies are JSON.
func (g *BrowserGuard) Check(r *http.Request, jsonBody bool) *apierr.Error {
	if g == nil {
		return nil
	}
	if !g.hostAllowed(r.Host) {
		return &apierr.Error{Status: http.StatusForbidden, Type: apierr.TypePermission, Code: "host_not_allowed",
			Message: "This gateway does not answer under that Host name without a key; add it to security.allowed_hosts or configure gateway keys."}
	}
	if !g.originAllowed(r) {
		return &apierr.Error{Status: http.StatusForbidden, Type: apierr.TypePermission, Code: "cross_origin_forbidden",
			Message: "Cross-origin requests are refused without a key; add the origin to security.allowed_origins or configure gateway keys."}
	}
	if ct := r.Header.Get("Content-Type"); jsonBody && hasBody(r) && ct != "" && !isJSON(ct) {
		return &apierr.Error{Status: http.StatusUnsupportedMediaType, Type: apierr.TypeInvalidRequest, Code: "unsupported_media_type",
			Message: "The request body must be sent as Content-Type: application/json."}
	}
	return nil
}

// Middleware returns the guard as echo middleware, its refusals written by
// write (apierr.Write when nil).
func (g *BrowserGuard) Middleware(jsonBody bool, write ErrorWriter) echo.MiddlewareFunc {
	if write == nil {
		write = apierr.Write
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if g == nil {
			return next
		}
		return func(c echo.Context) error {
			if e := g.Check(c.Request(), jsonBody); e != nil {
				write(c.Response(), e)
				return nil
			}
			return next(c)
		}
	}
}

// hostAllowed reports whether a Host header names this gateway.
func (g *BrowserGuard) hostAllowed(host string) bool {
	if host == "" {
		// Only HTTP/1.0 clients omit Host; browsers never do.
		return true
	}
	h := hostName(host)
	if h == "" {
		return false
	}
	if net.ParseIP(h) != nil || g.names[h] || strings.HasSuffix(h, ".localhost") {
		return true
	}
	for _, s := range g.suffixes {
		if strings.HasSuffix(h, s) {
			return true
		}
	}
	return false
}

// originAllowed reports whether a request comes from the gateway's own
// origin, an allow-listed one, or no page at all.
func (g *BrowserGuard) originAllowed(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		if r.Header.Get("Sec-Fetch-Site") != "cross-site" {
			return true
		}
		navigate := r.Header.Get("Sec-Fetch-Mode") == "navigate"
		return navigate && (r.Method == http.MethodGet || r.Method == http.MethodHead)
	}
	if g.origins[normalOrigin(o)] {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return sameHostPort(u.Scheme, u.Host, r)
}

// sameHostPort reports whether an origin's host and port (its scheme's
// default when it names none) are the request's Host (where no port means
// the same default: behind a TLS-terminating proxy the request's own scheme
// is unknown).
func sameHostPort(scheme, originHost string, r *http.Request) bool {
	def := "80"
	if scheme == "https" {
		def = "443"
	}
	oh, op := splitHostPort(originHost, def)
	rh, rp := splitHostPort(r.Host, def)
	return oh != "" && oh == rh && op == rp
}

// splitHostPort returns a host's lower-case name and its port (def when
// it names none).
func splitHostPort(hostport, def string) (string, string) {
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		h, p = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), def
	}
	return strings.TrimSuffix(strings.ToLower(h), "."), p
}

// hostName returns the lower-case name of "host[:port]" (brackets of an
// IPv6 literal removed), "" for an empty or wildcard host.
func hostName(hostport string) string {
	h, _ := splitHostPort(hostport, "")
	switch h {
	case "", "0.0.0.0", "::":
		return ""
	}
	return h
}

// normalOrigin returns scheme://host[:port] in lower case without a
// trailing slash, "" when o is not an http(s) origin.
func normalOrigin(o string) string {
	u, err := url.Parse(strings.TrimSpace(o))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	return strings.ToLower(u.Scheme + "://" + u.Host)
}

// hasBody reports whether a request carries a body a handler would read.
func hasBody(r *http.Request) bool {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		return false
	}
	return r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
}

// isJSON reports whether a Content-Type is application/json or a +json type
// (parameters ignored). It runs on every memory-on request, so it reads the
// media type in place rather than through mime.ParseMediaType's map.
func isJSON(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.TrimSpace(mt)
	typ, sub, ok := strings.Cut(mt, "/")
	if !ok || !strings.EqualFold(typ, "application") {
		return false
	}
	return strings.EqualFold(sub, "json") || (len(sub) > len("+json") && strings.EqualFold(sub[len(sub)-len("+json"):], "+json"))
}
