package record

import "github.com/prometheus/client_golang/prometheus"

// capturerMetrics are a Capturer's metrics. They are not registered
// anywhere; the caller registers Collectors.
type capturerMetrics struct {
	captured    prometheus.Counter
	queued      prometheus.Counter
	saved       prometheus.Counter
	duplicates  prometheus.Counter
	erased      prometheus.Counter
	dropped     prometheus.Counter
	deadLetters prometheus.Counter
	redacted    prometheus.Counter
	sanitized   prometheus.Counter
	waits       prometheus.Counter
	rerouted    prometheus.Counter
	enrichLost  prometheus.Counter
	cut         prometheus.Counter
	cutMessages prometheus.Counter
	rewinds     prometheus.Counter
	failures    *prometheus.CounterVec
	saveSeconds prometheus.Histogram
	groupSize   prometheus.Histogram
	retryDepth  func() float64
	inflight    func() float64
}

func newCapturerMetrics() *capturerMetrics {
	return &capturerMetrics{
		captured: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_captured_total",
			Help: "Exchanges handed to capture.",
		}),
		queued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_fallback_queued_total",
			Help: "Exchanges put in the durable capture queue because the store failed (the worker stores them).",
		}),
		saved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_direct_saved_total",
			Help: "Exchanges the capturer stored itself, on the request path (duplicates and erased included).",
		}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_direct_duplicates_total",
			Help: "Direct saves the store reported as already stored.",
		}),
		erased: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_direct_erased_total",
			Help: "Direct saves the store discarded because the user was erased.",
		}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_dropped_total",
			Help: "Exchanges that will never be stored (buffer full, refused and not set aside, abandoned at shutdown).",
		}),
		deadLetters: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_dead_letters_total",
			Help: "Exchanges the store refused for good, set aside as dead letters so the others go on.",
		}),
		redacted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_secrets_redacted_total",
			Help: "Secrets replaced by placeholders before storage.",
		}),
		sanitized: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_sanitized_total",
			Help: "Captured fields whose NUL bytes or invalid UTF-8 were cleaned before storage.",
		}),
		waits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_read_waits_total",
			Help: "Requests that waited for their conversation's previous turn to be stored.",
		}),
		rerouted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_rerouted_total",
			Help: "Exchanges of a derived conversation that another chat's turns had reached first, stored in the branch their history continues.",
		}),
		enrichLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_enrich_unqueued_total",
			Help: "Stored exchanges that could not be queued for enrichment (they stay stored).",
		}),
		cut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_history_cut_total",
			Help: "Exchanges whose resent history was longer than capture.max_history_messages (after its first messages): its older messages were left unstored.",
		}),
		cutMessages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_history_unstored_messages_total",
			Help: "Messages of resent histories left unstored by capture.max_history_messages.",
		}),
		rewinds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "memgate_capture_history_rewinds_total",
			Help: "Exchanges whose client changed a stored message in the part of its history the cut left out: the stored branch from there was superseded.",
		}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memgate_capture_failures_total",
			Help: "Failed capture steps, by stage (save, group, enqueue, queued_check, enrich_enqueue, encode, buffer_full, save_wait, reroute, chat_lock, chat_lock_held, chat_lock_lost, expired).",
		}, []string{"stage"}),
		saveSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "memgate_capture_save_seconds",
			Help:    "Time from capture to the exchange stored in its conversation by the capturer.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		groupSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "memgate_capture_group_size",
			Help:    "Exchanges stored per group commit.",
			Buckets: []float64{2, 4, 8, 16, 32, 64, 128},
		}),
	}
}

// Collectors returns the Capturer's metrics for the caller to register:
// counters of captured, directly stored (duplicate, erased), queued,
// dropped, dead-lettered, sanitized and redacted exchanges, histories
// cut (memory.Exchange.Skipped), the messages they left unstored and the
// changes found among those (rewinds), failures by
// stage, the time to store, and gauges of the exchanges in flight and
// waiting for retry.
func (c *Capturer) Collectors() []prometheus.Collector {
	m := c.metrics
	return append(c.purges.collectors(),
		m.captured, m.queued, m.saved, m.duplicates, m.erased, m.dropped, m.deadLetters, m.redacted,
		m.sanitized, m.waits, m.rerouted, m.enrichLost, m.cut, m.cutMessages, m.rewinds, m.failures, m.saveSeconds, m.groupSize,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "memgate_capture_retry_waiting",
			Help: "Exchanges waiting for the queue or the store to come back.",
		}, m.retryDepth),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "memgate_capture_inflight",
			Help: "Captured exchanges not yet stored (or queued).",
		}, m.inflight),
	)
}
