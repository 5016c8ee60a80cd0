package server

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *fakeClock               { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func TestFailureLimiterBucket(t *testing.T) {
	clk := newClock()
	l := NewFailureLimiter(3, 10*time.Second, 100, clk.now)
	for i := 0; i < 3; i++ {
		if d := l.Wait("a"); d != 0 {
			t.Fatalf("attempt %d: wait %v, want 0", i, d)
		}
		l.Fail("a")
	}
	if d := l.Wait("a"); d != 10*time.Second {
		t.Fatalf("after burst: wait %v, want 10s", d)
	}
	if d := l.Wait("b"); d != 0 {
		t.Fatalf("other client limited: %v", d)
	}
	clk.add(4 * time.Second)
	if d := l.Wait("a"); d != 6*time.Second {
		t.Fatalf("after 4s: wait %v, want 6s", d)
	}
	clk.add(6 * time.Second)
	if d := l.Wait("a"); d != 0 {
		t.Fatalf("after refill: wait %v, want 0", d)
	}
	l.Fail("a")
	if d := l.Wait("a"); d != 10*time.Second {
		t.Fatalf("one refilled attempt used: wait %v, want 10s", d)
	}
	// A full bucket is forgotten.
	clk.add(time.Hour)
	if l.Wait("a"); l.Clients() != 0 {
		t.Fatalf("clients %d after full refill, want 0", l.Clients())
	}
}

func TestFailureLimiterBoundedClients(t *testing.T) {
	clk := newClock()
	l := NewFailureLimiter(1, time.Minute, 50, clk.now)
	for i := 0; i < 10_000; i++ {
		l.Fail("10.0." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256))
	}
	if n := l.Clients(); n != 50 {
		t.Fatalf("clients %d, want the bound 50", n)
	}
	// The most recent failures are kept.
	if d := l.Wait("10.0.39.15"); d == 0 {
		t.Fatal("most recent client forgotten")
	}
}

func TestFailureLimiterOff(t *testing.T) {
	if l := NewFailureLimiter(0, time.Second, 10, nil); l != nil {
		t.Fatal("burst 0 should turn the limiter off")
	}
	var l *FailureLimiter
	l.Fail("x")
	if l.Wait("x") != 0 {
		t.Fatal("nil limiter limited")
	}
}

func TestClientOf(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1:5555":            "192.0.2.1",
		"[2001:db8:1:2:3::9]:443":   "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:80": "2001:db8:1:2::/64",
		"[::ffff:192.0.2.7]:1":      "192.0.2.7",
	} {
		if got := ClientOf(in); got != want {
			t.Errorf("ClientOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestFailureLimiterMiddleware: refused keys take attempts; past the burst
// the client gets 429 with Retry-After before its key is checked, others do
// not, and the limit lifts as the clock moves.
func TestFailureLimiterMiddleware(t *testing.T) {
	clk := newClock()
	l := NewFailureLimiter(2, 30*time.Second, 100, clk.now)
	e := echo.New()
	checked := 0
	h := func(c echo.Context) error {
		checked++
		if c.Request().Header.Get("Authorization") != "Bearer good" {
			ExchangeOf(c.Request().Context()).AuthFailed()
			return c.NoContent(http.StatusUnauthorized)
		}
		return c.NoContent(http.StatusOK)
	}
	withExchange := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			c.SetRequest(r.WithContext(contextWithExchange(r.Context(), &Exchange{})))
			return next(c)
		}
	}
	e.GET("/v1/x", h, withExchange, l.Middleware(nil))
	do := func(remote, key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/v1/x", nil)
		r.RemoteAddr = remote
		r.Header.Set("Authorization", "Bearer "+key)
		w := httptest.NewRecorder()
		e.ServeHTTP(w, r)
		return w
	}
	for i := 0; i < 2; i++ {
		if w := do("198.51.100.7:1000", "bad"); w.Code != http.StatusUnauthorized {
			t.Fatalf("failure %d: status %d", i, w.Code)
		}
	}
	before := checked
	w := do("198.51.100.7:1001", "good")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "30" {
		t.Fatalf("limited client: status %d Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	if checked != before {
		t.Fatal("the key of a limited client was checked")
	}
	if w := do("198.51.100.8:1000", "good"); w.Code != http.StatusOK {
		t.Fatalf("other client: status %d", w.Code)
	}
	clk.add(30 * time.Second)
	if w := do("198.51.100.7:1002", "good"); w.Code != http.StatusOK {
		t.Fatalf("after Retry-After: status %d", w.Code)
	}
}
