package server

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"github.com/memgate/memgate/internal/apierr"
)

// FailureLimiter bounds how fast one client may try keys and logins. Each
// client has a bucket of burst attempts, one coming back every refill;
// every refused key or login takes one, and while a client's bucket is
// empty its requests are refused (429 with Retry-After) before any key is
// checked, so a guessing client learns nothing more. Successful requests
// take nothing. It remembers at most maxClients clients, forgetting the
// least recently failed first, so its memory is bounded whatever the
// number of addresses. A nil *FailureLimiter limits nothing.
//
// A client is its TCP peer's address (an IPv6 peer's /64, which one host
// usually owns whole), never a forwarded-for header: behind a reverse
// proxy every client shares the proxy's address.
type FailureLimiter struct {
	burst   int
	refill  time.Duration
	now     func() time.Time
	clients *lru.Cache[string, *rate.Limiter]
}

// NewFailureLimiter returns a limiter allowing burst failures per client,
// one more every refill, for at most maxClients clients; now is the clock
// (time.Now when nil). burst <= 0 or refill <= 0 returns nil: no limit.
func NewFailureLimiter(burst int, refill time.Duration, maxClients int, now func() time.Time) *FailureLimiter {
	if burst <= 0 || refill <= 0 {
		return nil
	}
	if now == nil {
		now = time.Now
	}
	c, _ := lru.New[string, *rate.Limiter](max(1, maxClients)) // errors only on a size <= 0
	return &FailureLimiter{burst: burst, refill: refill, now: now, clients: c}
}

// Wait returns how long client must wait before its next attempt (0: it
// may try now). A client whose attempts have all come back is forgotten.
func (l *FailureLimiter) Wait(client string) time.Duration {
	if l == nil {
		return 0
	}
	b, ok := l.clients.Get(client)
	if !ok {
		return 0
	}
	tokens := b.TokensAt(l.now())
	if tokens >= float64(l.burst) {
		l.clients.Remove(client)
		return 0
	}
	if tokens >= 1 {
		return 0
	}
	return time.Duration(math.Ceil((1 - tokens) * float64(l.refill)))
}

// Fail takes one attempt from client.
func (l *FailureLimiter) Fail(client string) {
	if l == nil {
		return
	}
	b, ok := l.clients.Get(client)
	if !ok {
		b = rate.NewLimiter(rate.Every(l.refill), l.burst)
		b.SetLimitAt(l.now(), rate.Every(l.refill)) // start its clock at the injected now
		l.clients.Add(client, b)
	}
	b.AllowN(l.now(), 1)
}

// Clients returns how many clients the limiter remembers.
func (l *FailureLimiter) Clients() int {
	if l == nil {
		return 0
	}
	return l.clients.Len()
}

// Middleware returns the limiter as echo middleware: a client out of
// attempts gets 429 with Retry-After (written by write, apierr.Write when
// nil); a request its handler marked with Exchange.AuthFailed takes an
// attempt.
func (l *FailureLimiter) Middleware(write ErrorWriter) echo.MiddlewareFunc {
	if write == nil {
		write = apierr.Write
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if l == nil {
			return next
		}
		return func(c echo.Context) error {
			r := c.Request()
			client := ClientOf(r.RemoteAddr)
			if d := l.Wait(client); d > 0 {
				secs := int64(math.Ceil(d.Seconds()))
				c.Response().Header().Set("Retry-After", strconv.FormatInt(secs, 10))
				write(c.Response(), &apierr.Error{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: "too_many_failed_attempts",
					Message: "Too many refused keys or logins from this address; retry after " + strconv.FormatInt(secs, 10) + "s."})
				return nil
			}
			err := next(c)
			if x := ExchangeOf(r.Context()); x != nil && x.authFailed && !x.authCounted {
				x.authCounted = true
				l.Fail(client)
			}
			return err
		}
	}
}

// ClientOf returns the client a TCP peer address ("host:port") belongs to
// for rate limiting: its IPv4 address, or its IPv6 /64.
func ClientOf(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if ip4 := ip.To4(); ip4 != nil {
		return ip4.String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// MetricsKeyGuard returns the echo middleware of /metrics when a key
// protects it: it lets through only the requests whose Authorization
// header match accepts (the metrics key, the admin key); any other gets 401 (written by
// write, apierr.Write when nil), and one that presented a key is marked
// with Exchange.AuthFailed for the failed-key limiter.
func MetricsKeyGuard(match func(authorization string) bool, write ErrorWriter) echo.MiddlewareFunc {
	if write == nil {
		write = apierr.Write
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			auth := r.Header.Get("Authorization")
			if match(auth) {
				return next(c)
			}
			if x := ExchangeOf(r.Context()); x != nil && auth != "" {
				x.AuthFailed()
			}
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="memgate"`)
			write(c.Response(), &apierr.Error{Status: http.StatusUnauthorized, Type: apierr.TypeAuthentication, Code: "invalid_api_key",
				Message: "This route needs the metrics key or the admin key as Authorization: Bearer <key>."})
			return nil
		}
	}
}
