package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// passState links a pass-through request to its bookkeeping across the
// httputil.ReverseProxy hooks.
type passState struct {
	x     *exchange
	start time.Time
}

type passKey struct{}

// newReverseProxy returns the reverse proxy for every /v1 route the gateway
// does not own: the request goes upstream unchanged (minus hop-by-hop and
// X-Memory-* headers, with the gateway's auth rule and X-Request-Id), the
// response comes back unchanged, event streams flushed per write.
func (s *Server) newReverseProxy() *httputil.ReverseProxy {
	requireKey := s.requireKey()
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			in := pr.In.URL
			out := s.up.target(in.Path)
			if in.RawPath != "" {
				out.RawPath = s.up.base.EscapedPath() + strings.TrimPrefix(in.RawPath, "/v1")
			}
			out.RawQuery = in.RawQuery
			pr.Out.URL = out
			pr.Out.Host = ""
			for k := range pr.Out.Header {
				if isMemoryHeader(k) {
					delete(pr.Out.Header, k)
				}
			}
			s.up.setAuth(pr.Out.Header, requireKey)
			if st, ok := pr.In.Context().Value(passKey{}).(*passState); ok {
				pr.Out.Header["X-Request-Id"] = []string{st.x.id}
				st.start = time.Now()
			}
		},
		Transport:  s.up.rt,
		BufferPool: bufferPool{},
		ModifyResponse: func(resp *http.Response) error {
			if st, ok := resp.Request.Context().Value(passKey{}).(*passState); ok {
				resp.Body = &timedBody{ReadCloser: resp.Body, st: st}
			}
			if v, ok := resp.Header["X-Request-Id"]; ok {
				delete(resp.Header, "X-Request-Id")
				resp.Header["X-Upstream-Request-Id"] = v
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			st, _ := r.Context().Value(passKey{}).(*passState)
			if st != nil && !st.start.IsZero() && st.x.upstream == 0 {
				st.x.upstream = time.Since(st.start)
			}
			if errors.Is(err, context.Canceled) && context.Cause(r.Context()) == context.Canceled {
				if st != nil {
					st.x.status = statusClientClosed
				}
				return
			}
			e := upstreamError(err)
			id := ""
			if st != nil {
				id = st.x.id
			}
			s.log.Warn("upstream request failed", "request_id", id, "status", e.Status, "error", err)
			writeError(w, e)
		},
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// timedBody records the upstream time when the response body is closed.
type timedBody struct {
	io.ReadCloser
	st *passState
}

func (b *timedBody) Close() error {
	b.st.x.upstream = time.Since(b.st.start)
	return b.ReadCloser.Close()
}

// handlePassthrough serves every other /v1 route through the reverse proxy,
// after checking the gateway key when keys are configured.
func (s *Server) handlePassthrough(rp *httputil.ReverseProxy) handlerFunc {
	return func(w *echo.Response, r *http.Request, x *exchange) {
		if s.requireKey() {
			if _, _, aerr := s.identify(r.Header, ""); aerr != nil {
				writeError(w, aerr)
				return
			}
		}
		st := &passState{x: x}
		rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), passKey{}, st)))
		if x.status == 0 && r.Context().Err() != nil {
			x.status = statusClientClosed
		}
	}
}
