package ui

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// healthGroup is one panel of the health section: the current values of
// the metric families it covers.
type healthGroup struct {
	Title  string
	Rows   []healthRow
	Absent string
}

// healthRow is one series' current value.
type healthRow struct {
	Metric, Labels, Value, Help string
}

// healthPanels choose the metric families shown: by name prefix or
// substring, so metrics other packages add (a backlog gauge, a per-part
// degraded label) appear without changing this package.
var healthPanels = []struct {
	title string
	match func(name string) bool
}{
	{"Capture backlog", func(n string) bool {
		return strings.HasPrefix(n, "memgate_capture_") && (strings.Contains(n, "backlog") || strings.Contains(n, "waiting") ||
			strings.Contains(n, "pending") || strings.Contains(n, "queue") || strings.HasSuffix(n, "_enqueued_total") ||
			strings.HasSuffix(n, "_saved_total") || strings.HasSuffix(n, "_dropped_total") || strings.HasSuffix(n, "_captured_total"))
	}},
	{"Capture and enrichment lag", func(n string) bool {
		return strings.Contains(n, "lag") || strings.Contains(n, "enrich") || strings.HasPrefix(n, "memgate_compaction_") ||
			strings.HasPrefix(n, "memgate_fact_extraction_")
	}},
	{"Degraded requests", func(n string) bool { return strings.Contains(n, "degraded") }},
}

// healthOf reads the current values of the health panels' metrics.
func healthOf(g prometheus.Gatherer) ([]healthGroup, error) {
	mfs, err := g.Gather()
	groups := make([]healthGroup, len(healthPanels))
	for i, p := range healthPanels {
		groups[i].Title = p.title
		for _, mf := range mfs {
			if !p.match(mf.GetName()) {
				continue
			}
			for _, m := range mf.GetMetric() {
				groups[i].Rows = append(groups[i].Rows, healthRow{
					Metric: mf.GetName(), Labels: labelsOf(m), Value: valueOf(mf.GetType(), m), Help: mf.GetHelp(),
				})
			}
		}
		if len(groups[i].Rows) == 0 {
			groups[i].Absent = "No such metric on this gateway."
		}
	}
	if err != nil {
		return groups, fmt.Errorf("ui: gather metrics: %w", err)
	}
	return groups, nil
}

// labelsOf renders a series' labels as k="v" pairs.
func labelsOf(m *dto.Metric) string {
	var ps []string
	for _, l := range m.GetLabel() {
		ps = append(ps, l.GetName()+"="+fmt.Sprintf("%q", l.GetValue()))
	}
	sort.Strings(ps)
	return strings.Join(ps, " ")
}

// valueOf renders a series' current value: the number for counters and
// gauges; count, mean and an approximate p95 for histograms.
func valueOf(t dto.MetricType, m *dto.Metric) string {
	switch t {
	case dto.MetricType_COUNTER:
		return num(m.GetCounter().GetValue())
	case dto.MetricType_GAUGE:
		return num(m.GetGauge().GetValue())
	case dto.MetricType_UNTYPED:
		return num(m.GetUntyped().GetValue())
	case dto.MetricType_HISTOGRAM:
		h := m.GetHistogram()
		n := h.GetSampleCount()
		if n == 0 {
			return "no samples"
		}
		return fmt.Sprintf("%d samples, mean %s, p95 ≤ %s", n, num(h.GetSampleSum()/float64(n)), num(p95(h)))
	case dto.MetricType_SUMMARY:
		s := m.GetSummary()
		return fmt.Sprintf("%d samples, sum %s", s.GetSampleCount(), num(s.GetSampleSum()))
	}
	return ""
}

// p95 is the upper bound of the bucket holding the 95th percentile.
func p95(h *dto.Histogram) float64 {
	want := uint64(math.Ceil(0.95 * float64(h.GetSampleCount())))
	for _, b := range h.GetBucket() {
		if b.GetCumulativeCount() >= want {
			return b.GetUpperBound()
		}
	}
	return math.Inf(1)
}

// num formats a metric value compactly.
func num(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}
