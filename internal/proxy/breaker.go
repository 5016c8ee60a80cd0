package proxy

import (
	"container/list"
	"errors"
	"log/slog"
	"net/http"
	"sync"

	"github.com/sony/gobreaker/v2"

	"github.com/memgate/memgate/internal/memory"
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

// maxBreakers bounds the breakers kept: tenants and model names come from
// clients. Past it, the breaker used least recently is forgotten (its
// counts start again should its tenant and model come back).
const maxBreakers = 1024

// breakerKey identifies a breaker: an upstream host, a tenant ("" when the
// request names none) and a model ("" on routes whose model the proxy does
// not read; else memory.ModelLabel of the body's model, bounded because a
// breaker keeps it three times: its key, its name and the gauge's label).
type breakerKey struct{ host, tenant, model string }

// gaugeKey is a series of memgate_upstream_breaker_state: a host and a
// model, whatever the tenant.
type gaugeKey struct{ host, model string }

// breakerEntry is a kept breaker, with its state as its last change left it
// and whether it was forgotten (both under breakers.mu).
type breakerEntry struct {
	key     breakerKey
	cb      *gobreaker.CircuitBreaker[*http.Response]
	state   gobreaker.State
	evicted bool
}

// breakers holds one circuit breaker per upstream host, tenant and model,
// so one failing model does not shut every user of every model out, and
// one tenant making a model fail (its requests answered 5xx) does not shut
// the other tenants out of it. At most max are kept, the least recently
// used forgotten first. The gauge of a host and model is the most open
// state among its tenants' breakers.
type breakers struct {
	cfg Breaker
	m   *metrics
	log *slog.Logger
	max int

	// mu guards everything below. A breaker's state change takes it
	// under the breaker's own lock; nothing holding mu calls a breaker.
	mu  sync.Mutex
	cbs map[breakerKey]*list.Element // of *breakerEntry, in lru
	lru *list.List                   // most recently used first
	// states counts the kept breakers of a host and model in each state
	// (closed, half-open, open).
	states map[gaugeKey]*[3]int
}

func newBreakers(cfg Breaker, m *metrics, log *slog.Logger) *breakers {
	return &breakers{cfg: cfg, m: m, log: log, max: maxBreakers,
		cbs: map[breakerKey]*list.Element{}, lru: list.New(), states: map[gaugeKey]*[3]int{}}
}

// get returns k's breaker, creating it on first use (forgetting the least
// recently used one past b.max).
func (b *breakers) get(k breakerKey) *gobreaker.CircuitBreaker[*http.Response] {
	b.mu.Lock()
	defer b.mu.Unlock()
	if el := b.cbs[k]; el != nil {
		b.lru.MoveToFront(el)
		return el.Value.(*breakerEntry).cb
	}
	for b.lru.Len() >= max(1, b.max) {
		b.evict(b.lru.Back())
	}
	e := &breakerEntry{key: k, state: gobreaker.StateClosed}
	failures := uint32(b.cfg.ConsecutiveFailures)
	e.cb = gobreaker.NewCircuitBreaker[*http.Response](gobreaker.Settings{
		Name:        k.host + " " + k.model,
		MaxRequests: uint32(b.cfg.HalfOpenRequests),
		Timeout:     b.cfg.OpenTimeout,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
		IsExcluded:  func(err error) bool { return errors.Is(err, errNotUpstreams) },
		OnStateChange: func(_ string, from, to gobreaker.State) {
			b.changed(e, to)
			b.log.Warn("upstream circuit breaker", "host", k.host, "tenant", k.tenant, "model", k.model, "from", from.String(), "to", to.String())
		},
	})
	b.cbs[k] = b.lru.PushFront(e)
	b.count(e, +1)
	return e.cb
}

// changed records e's new state, unless e was forgotten.
func (b *breakers) changed(e *breakerEntry, to gobreaker.State) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e.evicted {
		return
	}
	b.count(e, -1)
	e.state = to
	b.count(e, +1)
}

// evict forgets el's breaker; b.mu is held.
func (b *breakers) evict(el *list.Element) {
	e := b.lru.Remove(el).(*breakerEntry)
	delete(b.cbs, e.key)
	e.evicted = true
	b.count(e, -1)
}

// count adds d to the breakers of e's host and model in e's state and sets
// their gauge to the most open state any of them is in, deleting the series
// when none is left; b.mu is held.
func (b *breakers) count(e *breakerEntry, d int) {
	gk := gaugeKey{e.key.host, e.key.model}
	n := b.states[gk]
	if n == nil {
		n = new([3]int)
		b.states[gk] = n
	}
	if s := int(e.state); s >= 0 && s < len(n) {
		n[s] += d
	}
	for s := len(n) - 1; s >= 0; s-- {
		if n[s] > 0 {
			b.m.breaker.WithLabelValues(gk.host, gk.model).Set(float64(s))
			return
		}
	}
	delete(b.states, gk)
	b.m.breaker.DeleteLabelValues(gk.host, gk.model)
}

// breakerTransport sends each attempt through the breaker of its upstream
// host, tenant and model. Only the upstream's own failures count: connection
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
		k.tenant, k.model = f.tenant, memory.ModelLabel(f.model)
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
