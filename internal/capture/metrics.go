package capture

import "github.com/prometheus/client_golang/prometheus"

// capturerMetrics are a Capturer's counters. They are not registered
// anywhere; the caller registers Collectors.
type capturerMetrics struct {
	captured   prometheus.Counter
	enqueued   prometheus.Counter
	direct     prometheus.Counter
	saved      prometheus.Counter
	duplicates prometheus.Counter
	dropped    prometheus.Counter
	redacted   prometheus.Counter
	failures   *prometheus.CounterVec
	retryDepth func() float64
}

func newCapturerMetrics() *capturerMetrics {
	return &capturerMetrics{
		captured: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_captured_total",
			Help: "Exchanges handed to capture.",
		}),
		enqueued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_enqueued_total",
			Help: "Exchanges written to the durable capture queue.",
		}),
		direct: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_fallback_direct_total",
			Help: "Exchanges saved directly to the store because the queue failed.",
		}),
		saved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_direct_saved_total",
			Help: "Exchanges the capturer saved to the store itself (no queue, or queue down).",
		}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_direct_duplicates_total",
			Help: "Direct saves the store reported as already stored.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_dropped_total",
			Help: "Exchanges that will never be stored (buffer full, rejected by the store, abandoned at shutdown).",
		}),
		redacted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_secrets_redacted_total",
			Help: "Secrets replaced by placeholders before storage.",
		}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memgate_capture_failures_total",
			Help: "Failed capture steps, by stage (enqueue, save, invalid, encode).",
		}, []string{"stage"}),
	}
}

// Collectors returns the Capturer's metrics for the caller to register:
// counters of captured, enqueued, directly saved (and duplicate), fallback,
// dropped and redacted exchanges, failures by stage, and a gauge of the
// exchanges waiting for retry.
func (c *Capturer) Collectors() []prometheus.Collector {
	m := c.metrics
	return []prometheus.Collector{
		m.captured, m.enqueued, m.direct, m.saved, m.duplicates, m.dropped, m.redacted, m.failures,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "memgate_capture_retry_waiting",
			Help: "Exchanges waiting for the queue or the store to come back.",
		}, m.retryDepth),
	}
}
