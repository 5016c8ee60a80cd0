package prompt

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// loadMetrics time the memory parts a request loads.
type loadMetrics struct {
	seconds *prometheus.HistogramVec
}

// loadBuckets span 1 ms to 2.5 s: a local store answers at the low end, a
// remote embedding provider in the hundreds of milliseconds.
var loadBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .15, .2, .25, .3, .4, .5, 1, 2.5}

func newLoadMetrics() *loadMetrics {
	return &loadMetrics{seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "memgate_memory_part_load_seconds",
		Help:    "Time from the start of loading a request's memory until each part was back, by part: history, summary, facts, recall (which includes the query embedding), newchat (whether another gateway process saw the user resend their history, read from Redis).",
		Buckets: loadBuckets,
	}, []string{"part"})}
}

func (m *loadMetrics) observe(part string, d time.Duration) {
	m.seconds.WithLabelValues(part).Observe(d.Seconds())
}

// Collectors returns the Assembler's Prometheus collectors.
func (a *Assembler) Collectors() []prometheus.Collector {
	return []prometheus.Collector{a.m.seconds}
}
