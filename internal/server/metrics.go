package server

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the server's collectors: requests, latency, upstream time and
// gateway overhead by route.
type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	upstream *prometheus.HistogramVec
	overhead *prometheus.HistogramVec
	inFlight prometheus.Gauge

	mu     sync.Mutex
	routes map[string]*routeMetrics
}

// latencyBuckets span 50µs to 60s: gateway overhead sits at the low end,
// whole streams at the high end.
var latencyBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memgate_http_requests_total", Help: "HTTP requests by route and status (499: client went away).",
		}, []string{"route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "memgate_http_request_duration_seconds", Help: "Time from request to the end of the response, by route and status.", Buckets: latencyBuckets,
		}, []string{"route", "status"}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "memgate_upstream_duration_seconds", Help: "Time spent in upstream calls (to the end of the upstream body), by route.", Buckets: latencyBuckets,
		}, []string{"route"}),
		overhead: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "memgate_gateway_overhead_seconds", Help: "Request duration minus upstream time, by route.", Buckets: latencyBuckets,
		}, []string{"route"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "memgate_http_in_flight_requests", Help: "Requests being served.",
		}),
		routes: map[string]*routeMetrics{},
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.upstream, m.overhead, m.inFlight} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// statusText caches status labels so recording a request does not allocate.
var statusText = func() [600]string {
	var t [600]string
	for i := range t {
		t[i] = strconv.Itoa(i)
	}
	return t
}()

// routeMetrics are one route's collectors, curried once.
type routeMetrics struct {
	requests *prometheus.CounterVec
	latency  prometheus.ObserverVec
	upstream prometheus.Observer
	overhead prometheus.Observer
	// byStatus holds the counter and histogram of each status seen, so
	// recording a request neither hashes labels nor takes the vectors'
	// locks; the last slot is for "other".
	byStatus [len(statusText) + 1]atomic.Pointer[statusMetrics]
}

// statusMetrics are a route's collectors for one status.
type statusMetrics struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

// route returns the named route's collectors, made on first use.
func (m *metrics) route(name string) *routeMetrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rm := m.routes[name]; rm != nil {
		return rm
	}
	l := prometheus.Labels{"route": name}
	rm := &routeMetrics{
		requests: m.requests.MustCurryWith(l),
		latency:  m.latency.MustCurryWith(l),
		upstream: m.upstream.With(l),
		overhead: m.overhead.With(l),
	}
	m.routes[name] = rm
	return rm
}

// observe records one finished request.
func (r *routeMetrics) observe(status int, total, upstream time.Duration) {
	i, s := len(statusText), "other"
	if status > 0 && status < len(statusText) {
		i, s = status, statusText[status]
	}
	sm := r.byStatus[i].Load()
	if sm == nil {
		sm = &statusMetrics{requests: r.requests.WithLabelValues(s), latency: r.latency.WithLabelValues(s)}
		r.byStatus[i].Store(sm)
	}
	sm.requests.Inc()
	sm.latency.Observe(total.Seconds())
	if upstream > 0 {
		r.upstream.Observe(upstream.Seconds())
		r.overhead.Observe(max(total-upstream, 0).Seconds())
	}
}
