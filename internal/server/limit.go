package server

import (
	"container/list"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

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
	burst  float64
	refill time.Duration
	max    int
	now    func() time.Time

	mu sync.Mutex
	// lru holds *failBucket, most recently failed at the front.
	lru *list.List
	m   map[string]*list.Element
}

// failBucket is one client's remaining attempts as of at.
type failBucket struct {
	client string
	tokens float64
	at     time.Time
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
	return &FailureLimiter{burst: float64(burst), refill: refill, max: max(1, maxClients), now: now,
		lru: list.New(), m: map[string]*list.Element{}}
}

// Wait returns how long client must wait before its next attempt (0: it
// may try now).
func (l *FailureLimiter) Wait(client string) time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	el := l.m[client]
	if el == nil {
		return 0
	}
	b := el.Value.(*failBucket)
	if l.fill(b) {
		l.lru.Remove(el)
		delete(l.m, client)
		return 0
	}
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration(math.Ceil((1 - b.tokens) * float64(l.refill)))
}

// Fail takes one attempt from client.
func (l *FailureLimiter) Fail(client string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if el := l.m[client]; el != nil {
		b := el.Value.(*failBucket)
		l.fill(b)
		b.tokens = max(b.tokens-1, 0)
		l.lru.MoveToFront(el)
		return
	}
	if l.lru.Len() >= l.max {
		oldest := l.lru.Back()
		l.lru.Remove(oldest)
		delete(l.m, oldest.Value.(*failBucket).client)
	}
	l.m[client] = l.lru.PushFront(&failBucket{client: client, tokens: l.burst - 1, at: l.now()})
}

// Clients returns how many clients the limiter remembers.
func (l *FailureLimiter) Clients() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lru.Len()
}

// fill adds the attempts that came back since b.at; it reports whether the
// bucket is full again (the client need not be remembered).
func (l *FailureLimiter) fill(b *failBucket) bool {
	now := l.now()
	if el := now.Sub(b.at); el > 0 {
		b.tokens = min(l.burst, b.tokens+float64(el)/float64(l.refill))
		b.at = now
	}
	return b.tokens >= l.burst
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
