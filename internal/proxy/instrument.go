package proxy

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/wirehdr"
)

// exchange is the bookkeeping of one request, shared between the
// instrumentation and the handler.
type exchange struct {
	id string
	// status overrides the response status for metrics (499, or 502 when a
	// stream broke after its headers were sent).
	status int
	// upstream is the time spent waiting on the upstream.
	upstream time.Duration
}

// handlerFunc is a route handler with its request's bookkeeping.
type handlerFunc func(w *echo.Response, r *http.Request, x *exchange)

// instrument wraps a handler with what every route gets: the X-Request-Id
// (echoed or generated, set on the response), the in-flight gauge, request
// count and latency by route and status, upstream time and gateway overhead,
// and a debug-level access log that never includes headers or bodies.
func (s *Server) instrument(route string, h handlerFunc) echo.HandlerFunc {
	rm := s.m.route(route)
	return func(c echo.Context) error {
		start := time.Now()
		r, w := c.Request(), c.Response()
		x := exchange{id: requestID(wirehdr.Value(r.Header, "X-Request-Id"), s.idPrefix)}
		w.Header()["X-Request-Id"] = []string{x.id}
		s.m.inFlight.Inc()
		defer func() {
			s.m.inFlight.Dec()
			status := w.Status
			if x.status != 0 {
				status = x.status
			}
			total := time.Since(start)
			rm.observe(status, total, x.upstream)
			s.log.LogAttrs(r.Context(), slog.LevelDebug, "request",
				slog.String("route", route), slog.String("method", r.Method), slog.Int("status", status),
				slog.String("request_id", x.id), slog.Duration("duration", total), slog.Duration("upstream", x.upstream))
		}()
		h(w, r, &x)
		return nil
	}
}

var idCounter atomic.Uint64

// newIDPrefix returns this process's random request id prefix, so generated
// ids are unique across restarts and replicas.
func newIDPrefix() string {
	var b [6]byte
	rand.Read(b[:])
	return "req-" + hex.EncodeToString(b[:]) + "-"
}

// requestID returns the client's X-Request-Id when it is 1–128 visible ASCII
// characters, else a new unique id.
func requestID(client, prefix string) string {
	if n := len(client); n > 0 && n <= 128 {
		ok := true
		for i := 0; i < n; i++ {
			if c := client[i]; c <= ' ' || c > '~' {
				ok = false
				break
			}
		}
		if ok {
			// A copy: the client's value is a slice of the whole request
			// head, which the id would otherwise keep alive in captures.
			return strings.Clone(client)
		}
	}
	var b [48]byte
	return string(strconv.AppendUint(append(b[:0], prefix...), idCounter.Add(1), 36))
}

// newConversationID returns a random conversation id valid per
// memory.ValidID.
func newConversationID() string {
	var b [12]byte
	rand.Read(b[:])
	return "conv-" + hex.EncodeToString(b[:])
}
