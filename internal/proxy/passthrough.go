package proxy

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/server"
)

// handlePassthrough serves every /v1 route the gateway does not own through
// the reverse proxy, after checking the gateway key when keys are
// configured.
func (p *Proxy) handlePassthrough(c echo.Context) error {
	r := c.Request()
	if p.requireKey() {
		if _, _, aerr := p.identify(r.Header, ""); aerr != nil {
			return aerr
		}
	}
	f := &forward{x: server.ExchangeOf(r.Context())}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = clientBody{ReadCloser: r.Body, f: f}
	}
	p.rp.ServeHTTP(finalWriter{c.Response()}, withForward(r, f))
	return nil
}
