package ui

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
)

// chartRanges are the periods the savings chart offers, with their bins.
var chartRanges = []struct {
	Name string
	Span time.Duration
	Bins int
}{
	{"1h", time.Hour, 12},
	{"24h", 24 * time.Hour, 48},
	{"7d", 7 * 24 * time.Hour, 56},
	{"30d", 30 * 24 * time.Hour, 60},
}

// savingsData is the savings and health page's data.
type savingsData struct {
	Range   string
	Ranges  []string
	Enabled bool
	Chart   chart
	Totals  memory.SavingsBucket
	// SavedPct is the share of the full-history tokens memory did not send.
	SavedPct float64
	// RepeatedPct is the share of the tokens sent that repeat the previous
	// request's prompt prefix (cacheable); CachedPct the share the provider
	// reported reading from its cache.
	RepeatedPct, CachedPct float64
	Health                 []healthGroup
}

// chart is the savings chart, laid out in a 1000×300 SVG viewBox.
type chart struct {
	Bars         []bar
	MaxLabel     string
	From, To     string
	HasData      bool
	PlotX, PlotW float64
}

// bar is one bin of the chart: full history and sent.
type bar struct {
	X, W             float64
	OrigY, OrigH     float64
	SentY, SentH     float64
	Title            string
	Original, Sent   int64
	Requests, Degrad int64
}

// Chart geometry.
const (
	chartTop    = 10.0
	chartBottom = 270.0
	chartLeft   = 70.0
	chartRight  = 990.0
)

// handleSavings serves tokens sent against the full history over time for
// the tenant, from the stored counters, and the gateway's health.
func (u *UI) handleSavings(c echo.Context) error {
	ctx := c.Request().Context()
	rng := chartRanges[1]
	for _, r := range chartRanges {
		if r.Name == c.QueryParam("range") {
			rng = r
		}
	}
	d := savingsData{Range: rng.Name, Enabled: u.deps.Savings != nil}
	for _, r := range chartRanges {
		d.Ranges = append(d.Ranges, r.Name)
	}
	if d.Enabled {
		if u.deps.Flush != nil {
			fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			if err := u.deps.Flush(fctx); err != nil {
				u.log.Warn("ui: storing pending savings counts failed", "request_id", server.RequestID(c), "error", err)
			}
			cancel()
		}
		now := time.Now().UTC()
		from := now.Add(-rng.Span)
		bs, err := u.deps.Savings.Savings(ctx, tenantOf(c), from)
		if err != nil {
			return u.storeFailed(c, err)
		}
		d.Chart = drawChart(bs, from, now, rng.Bins)
		for _, b := range bs {
			d.Totals.Requests += b.Requests
			d.Totals.TokensOriginal += b.TokensOriginal
			d.Totals.TokensSent += b.TokensSent
			d.Totals.Degraded += b.Degraded
			d.Totals.TokensRepeated += b.TokensRepeated
			d.Totals.TokensCached += b.TokensCached
		}
		if d.Totals.TokensOriginal > 0 {
			d.SavedPct = 1 - float64(d.Totals.TokensSent)/float64(d.Totals.TokensOriginal)
		}
		if d.Totals.TokensSent > 0 {
			d.RepeatedPct = float64(d.Totals.TokensRepeated) / float64(d.Totals.TokensSent)
			d.CachedPct = float64(d.Totals.TokensCached) / float64(d.Totals.TokensSent)
		}
	}
	if u.deps.Metrics != nil {
		h, err := healthOf(u.deps.Metrics)
		if err != nil {
			u.log.Warn("ui: gather metrics", "error", err)
		}
		d.Health = h
	}
	return u.render(c, http.StatusOK, "savings", page{Title: "Savings and health", Nav: "savings", Data: d})
}

// drawChart bins the buckets between from and to into n bars.
func drawChart(bs []memory.SavingsBucket, from, to time.Time, n int) chart {
	ch := chart{From: when(from), To: when(to), PlotX: chartLeft, PlotW: chartRight - chartLeft}
	span := to.Sub(from)
	bins := make([]bar, n)
	for _, b := range bs {
		i := int(float64(b.Start.Sub(from)) / float64(span) * float64(n))
		if i < 0 || i >= n {
			i = min(max(i, 0), n-1)
		}
		bins[i].Original += b.TokensOriginal
		bins[i].Sent += b.TokensSent
		bins[i].Requests += b.Requests
		bins[i].Degrad += b.Degraded
	}
	var top int64
	for _, b := range bins {
		top = max(top, b.Original, b.Sent)
	}
	ch.HasData = top > 0
	ch.MaxLabel = funcs["thousands"].(func(int64) string)(top)
	if top == 0 {
		top = 1
	}
	w := (chartRight - chartLeft) / float64(n)
	height := chartBottom - chartTop
	for i := range bins {
		b := &bins[i]
		b.X, b.W = chartLeft+float64(i)*w+w*0.1, w*0.8
		b.OrigH = height * float64(b.Original) / float64(top)
		b.SentH = height * float64(b.Sent) / float64(top)
		b.OrigY, b.SentY = chartBottom-b.OrigH, chartBottom-b.SentH
		start := from.Add(time.Duration(float64(span) * float64(i) / float64(n)))
		b.Title = when(start)
	}
	ch.Bars = bins
	return ch
}
