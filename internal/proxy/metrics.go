package proxy

import "github.com/prometheus/client_golang/prometheus"

// metrics are the proxy's collectors.
type metrics struct {
	breaker   *prometheus.GaugeVec
	degraded  prometheus.Counter
	retries   prometheus.Counter
	captureDr *prometheus.CounterVec
	// tokensSent and tokensSaved account the prompts memory assembled.
	tokensSent, tokensSaved prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "memgate_upstream_breaker_state", Help: "Circuit breaker state per upstream host and model: 0 closed, 1 half-open, 2 open.",
		}, []string{"host", "model"}),
		degraded: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_memory_degraded_total", Help: "Chat requests forwarded without memory because loading it failed or timed out.",
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_upstream_retries_total", Help: "Upstream attempts retried (could not connect, or 502, 503, 504 before the body).",
		}),
		captureDr: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memgate_capture_skipped_total", Help: "Completed exchanges not captured, by reason: unreadable reply, too_large (over the capture cap), overflow (the stream tee fell behind).",
		}, []string{"reason"}),
		tokensSent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_memory_tokens_sent_total", Help: "Prompt tokens sent upstream in requests whose messages memory assembled.",
		}),
		tokensSaved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_memory_tokens_saved_total", Help: "Prompt tokens the client's request plus its stored history would have cost beyond what was sent.",
		}),
	}
	for _, c := range []prometheus.Collector{m.breaker, m.degraded, m.retries, m.captureDr, m.tokensSent, m.tokensSaved} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
