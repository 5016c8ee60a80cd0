package proxy

import (
	"errors"
	"log/slog"
	"net/http"
	"sync"

	"github.com/sony/gobreaker/v2"
)

// errBreakerOpen reports a request refused because the circuit breaker of
// its upstream and model is open (or half-open with its probes in flight).
var errBreakerOpen = errors.New("upstream circuit breaker open")

// errServerStatus marks a 5xx answer as a failure for the breaker.
var errServerStatus = errors.New("upstream 5xx")

// errNotUpstreams marks an outcome that says nothing about the upstream's
// health (the client went away, or shutdown cancelled the request): the
// breaker excludes it.
var errNotUpstreams = errors.New("request ended by the gateway side")

// maxBreakers bounds the breakers kept (model names come from clients);
// past it, new models share their host's overflow breaker.
const maxBreakers = 1024

// breakerKey identifies a breaker: an upstream host and a model ("" on
// routes whose model the proxy does not read).
type breakerKey struct{ host, model string }

// breakers holds one circuit breaker per upstream host and model, so one
// failing model does not shut every user of every model out.
type breakers struct {
	cfg Breaker
	m   *metrics
	log *slog.Logger
	mu  sync.RWMutex
	cbs map[breakerKey]*gobreaker.CircuitBreaker[*http.Response]
}

func newBreakers(cfg Breaker, m *metrics, log *slog.Logger) *breakers {
	return &breakers{cfg: cfg, m: m, log: log, cbs: map[breakerKey]*gobreaker.CircuitBreaker[*http.Response]{}}
}

// get returns k's breaker, creating it on first use.
func (b *breakers) get(k breakerKey) *gobreaker.CircuitBreaker[*http.Response] {
	b.mu.RLock()
	cb := b.cbs[k]
	b.mu.RUnlock()
	if cb != nil {
		return cb
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if cb = b.cbs[k]; cb != nil {
		return cb
	}
	if len(b.cbs) >= maxBreakers {
		k.model = "*"
		if cb = b.cbs[k]; cb != nil {
			return cb
		}
	}
	failures := uint32(b.cfg.ConsecutiveFailures)
	gauge := b.m.breaker.WithLabelValues(k.host, k.model)
	cb = gobreaker.NewCircuitBreaker[*http.Response](gobreaker.Settings{
		Name:        k.host + " " + k.model,
		MaxRequests: uint32(b.cfg.HalfOpenRequests),
		Timeout:     b.cfg.OpenTimeout,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
		IsExcluded:  func(err error) bool { return errors.Is(err, errNotUpstreams) },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			gauge.Set(float64(to))
			b.log.Warn("upstream circuit breaker", "host", k.host, "model", k.model, "from", from.String(), "to", to.String())
		},
	})
	gauge.Set(0)
	b.cbs[k] = cb
	return cb
}

// breakerTransport sends each attempt through the breaker of its upstream
// host and model. Only the upstream's own failures count: connection
// errors, timeouts and 5xx answers. A 4xx is a success for the breaker, and
// an attempt whose request context ended (the client hung up, or shutdown)
// or whose client body could not be read counts as nothing.
type breakerTransport struct {
	next     http.RoundTripper
	breakers *breakers
}

// RoundTrip implements http.RoundTripper.
func (t *breakerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	k := breakerKey{host: req.URL.Host}
	f := forwardOf(req.Context())
	if f != nil {
		k.model = f.model
	}
	var cause error
	resp, err := t.breakers.get(k).Execute(func() (*http.Response, error) {
		resp, err := t.next.RoundTrip(req)
		switch {
		case err != nil && (req.Context().Err() != nil || f != nil && f.bodyFailed.Load()):
			cause = err
			return nil, errNotUpstreams
		case err == nil && resp.StatusCode >= 500:
			return resp, errServerStatus
		}
		return resp, err
	})
	switch {
	case errors.Is(err, errServerStatus):
		return resp, nil
	case errors.Is(err, errNotUpstreams):
		return nil, cause
	case errors.Is(err, gobreaker.ErrOpenState), errors.Is(err, gobreaker.ErrTooManyRequests):
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errBreakerOpen
	}
	return resp, err
}
