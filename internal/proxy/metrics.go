package proxy

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// statusClientClosed is the status recorded when the client went away before
// the response was complete (nginx's and Caddy's 499).
const statusClientClosed = 499

// metrics holds the proxy's Prometheus collectors, registered on a registry
// of its own.
type metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	upstream  *prometheus.HistogramVec
	overhead  *prometheus.HistogramVec
	breaker   *prometheus.GaugeVec
	inFlight  prometheus.Gauge
	degraded  prometheus.Counter
	retries   prometheus.Counter
	captureDr prometheus.Counter
	// tokensSent and tokensSaved account the prompts memory assembled.
	tokensSent, tokensSaved prometheus.Counter
}

// latencyBuckets span 50µs to 60s: gateway overhead sits at the low end,
// whole streams at the high end.
var latencyBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

func newMetrics(extra []prometheus.Collector) (*metrics, error) {
	m := &metrics{
		reg: prometheus.NewRegistry(),
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
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "memgate_upstream_breaker_state", Help: "Circuit breaker state per upstream host: 0 closed, 1 half-open, 2 open.",
		}, []string{"host"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "memgate_http_in_flight_requests", Help: "Requests being served.",
		}),
		degraded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_memory_degraded_total", Help: "Chat requests forwarded without memory because loading it failed or timed out.",
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_upstream_retries_total", Help: "Upstream attempts retried (connection error, 429, 502, 503, 504).",
		}),
		captureDr: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_skipped_total", Help: "Completed exchanges not captured because the reply could not be read or the stream tee overflowed.",
		}),
		tokensSent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_memory_tokens_sent_total", Help: "Prompt tokens sent upstream in requests whose messages memory assembled.",
		}),
		tokensSaved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_memory_tokens_saved_total", Help: "Prompt tokens the client's request plus its stored history would have cost beyond what was sent.",
		}),
	}
	cs := append([]prometheus.Collector{
		m.requests, m.latency, m.upstream, m.overhead, m.breaker, m.inFlight, m.degraded, m.retries, m.captureDr,
		m.tokensSent, m.tokensSaved,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}),
	}, extra...)
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
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
	m        *metrics
	requests *prometheus.CounterVec
	latency  prometheus.ObserverVec
	upstream prometheus.Observer
	overhead prometheus.Observer
	// byStatus holds the request counter and latency histogram of each
	// status seen, so recording a request neither hashes labels nor
	// takes the vectors' locks; the last slot is for "other".
	byStatus [len(statusText) + 1]atomic.Pointer[statusMetrics]
}

// statusMetrics are a route's collectors for one status.
type statusMetrics struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

func (m *metrics) route(name string) *routeMetrics {
	l := prometheus.Labels{"route": name}
	return &routeMetrics{
		m:        m,
		requests: m.requests.MustCurryWith(l),
		latency:  m.latency.MustCurryWith(l),
		upstream: m.upstream.With(l),
		overhead: m.overhead.With(l),
	}
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
