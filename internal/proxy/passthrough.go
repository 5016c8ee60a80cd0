package proxy

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/server"
)

// handlePassthrough returns the handler of the /v1 routes the gateway does
// not own for API a: through the reverse proxy to a's upstream, after
// checking the gateway key when keys are configured (errors in a's shape).
func (p *Proxy) handlePassthrough(a *api) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if p.requireKey() {
			if _, _, aerr := p.identify(r.Header, ""); aerr != nil {
				a.writeError(c.Response(), aerr)
				return nil
			}
		}
		f := &forward{x: server.ExchangeOf(r.Context()), api: a}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = clientBody{ReadCloser: r.Body, f: f}
		}
		p.rp.ServeHTTP(finalWriter{c.Response()}, withForward(r, f))
		return nil
	}
}
