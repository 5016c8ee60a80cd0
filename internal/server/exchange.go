package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
)

// StatusClientClosed is the status recorded when the client went away
// before the response was complete (nginx's and Caddy's 499).
const StatusClientClosed = 499

// Exchange is the bookkeeping of one request, shared between the server's
// middleware and the handler: the request id, the status to record when it
// differs from the one written, and the time spent upstream.
type Exchange struct {
	id       string
	rm       *routeMetrics
	route    string
	status   int
	upstream time.Duration
	// mem is the memory accounting of a memory-on chat request.
	mem *memoryNote
	// authFailed: the request presented a credential that was refused;
	// authCounted: a FailureLimiter counted it (once, however many
	// limiters the request passed).
	authFailed, authCounted bool
}

// memoryNote is what memory did for one request, for the access log.
type memoryNote struct {
	sent, saved int
	degraded    string
}

type exchangeKey struct{}

// ExchangeOf returns the request's Exchange, or nil when the request was not
// served through a Server. Its methods accept a nil receiver.
func ExchangeOf(ctx context.Context) *Exchange {
	x, _ := ctx.Value(exchangeKey{}).(*Exchange)
	return x
}

// contextWithExchange returns ctx carrying x.
func contextWithExchange(ctx context.Context, x *Exchange) context.Context {
	return context.WithValue(ctx, exchangeKey{}, x)
}

// ID returns the request id (the client's X-Request-Id when valid, else a
// generated one); it is also set on the response and sent upstream.
func (x *Exchange) ID() string {
	if x == nil {
		return ""
	}
	return x.id
}

// SetStatus records code instead of the written status: 499 when the
// client went away, 502 when an upstream body broke after the headers were
// sent.
func (x *Exchange) SetStatus(code int) {
	if x != nil {
		x.status = code
	}
}

// SetMemory records what memory did for the request: the prompt tokens sent
// upstream, the tokens saved (original minus sent) and the degraded parts
// ("" when none); the access-log line carries them.
func (x *Exchange) SetMemory(sent, saved int, degraded string) {
	if x != nil {
		x.mem = &memoryNote{sent: sent, saved: saved, degraded: degraded}
	}
}

// AddDegraded adds part to the degraded parts the access-log line names,
// after those SetMemory recorded (a part found once memory was prepared:
// history the request resent that is left unstored).
func (x *Exchange) AddDegraded(part string) {
	switch {
	case x == nil:
	case x.mem == nil:
		x.mem = &memoryNote{degraded: part}
	case x.mem.degraded == "":
		x.mem.degraded = part
	default:
		x.mem.degraded += "," + part
	}
}

// AuthFailed records that the request presented a key (or a login) that
// was refused; a FailureLimiter in front of the route counts it against the
// client.
func (x *Exchange) AuthFailed() {
	if x != nil {
		x.authFailed = true
	}
}

// AddUpstream adds d to the time spent waiting on the upstream.
func (x *Exchange) AddUpstream(d time.Duration) {
	if x != nil {
		x.upstream += d
	}
}

// RequestID returns the id of the request c serves.
func RequestID(c echo.Context) string { return c.Response().Header().Get(echo.HeaderXRequestID) }

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
			return client
		}
	}
	return prefix + strconv.FormatUint(idCounter.Add(1), 36)
}
