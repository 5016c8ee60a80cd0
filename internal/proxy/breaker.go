package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"

	"github.com/sony/gobreaker/v2"

	"github.com/memgate/memgate/internal/config"
)

// errBreakerOpen reports a request refused because the upstream host's
// circuit breaker is open (or half-open with its probes in flight).
var errBreakerOpen = errors.New("upstream circuit breaker open")

// errServerStatus marks a 5xx answer as a failure for the breaker.
var errServerStatus = errors.New("upstream 5xx")

// breakers holds one circuit breaker per upstream host.
type breakers struct {
	cfg config.Breaker
	m   *metrics
	log *slog.Logger
	mu  sync.RWMutex
	cbs map[string]*gobreaker.CircuitBreaker[*http.Response]
}

func newBreakers(cfg config.Breaker, m *metrics, log *slog.Logger) *breakers {
	return &breakers{cfg: cfg, m: m, log: log, cbs: map[string]*gobreaker.CircuitBreaker[*http.Response]{}}
}

// get returns host's breaker, creating it on first use.
func (b *breakers) get(host string) *gobreaker.CircuitBreaker[*http.Response] {
	b.mu.RLock()
	cb := b.cbs[host]
	b.mu.RUnlock()
	if cb != nil {
		return cb
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if cb = b.cbs[host]; cb != nil {
		return cb
	}
	failures := uint32(b.cfg.ConsecutiveFailures)
	cb = gobreaker.NewCircuitBreaker[*http.Response](gobreaker.Settings{
		Name:        host,
		MaxRequests: uint32(b.cfg.HalfOpenRequests),
		Timeout:     b.cfg.OpenTimeout.D(),
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
		IsExcluded:  func(err error) bool { return errors.Is(err, context.Canceled) },
		OnStateChange: func(name string, from, to gobreaker.State) {
			b.m.breaker.WithLabelValues(name).Set(float64(to))
			b.log.Warn("upstream circuit breaker", "host", name, "from", from.String(), "to", to.String())
		},
	})
	b.m.breaker.WithLabelValues(host).Set(0)
	b.cbs[host] = cb
	return cb
}

// breakerTransport sends requests through their host's breaker. Connection
// errors and 5xx answers count as failures; a cancelled request counts as
// neither.
type breakerTransport struct {
	next     http.RoundTripper
	breakers *breakers
}

// RoundTrip implements http.RoundTripper.
func (t *breakerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.breakers.get(req.URL.Host).Execute(func() (*http.Response, error) {
		resp, err := t.next.RoundTrip(req)
		if err == nil && resp.StatusCode >= 500 {
			return resp, errServerStatus
		}
		return resp, err
	})
	switch {
	case errors.Is(err, errServerStatus):
		return resp, nil
	case errors.Is(err, gobreaker.ErrOpenState), errors.Is(err, gobreaker.ErrTooManyRequests):
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errBreakerOpen
	}
	return resp, err
}
