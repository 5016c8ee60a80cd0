package enrich

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
)

// storedExchange builds a small exchange with the given id, as the write
// path stores it.
func storedExchange(tb testing.TB, id, userText, replyText string) memory.Exchange {
	tb.Helper()
	msg := func(role, text string) memory.Message {
		raw := fmt.Sprintf(`{"role":%q,"content":%q}`, role, text)
		m, err := memory.ParseMessage([]byte(raw))
		if err != nil {
			tb.Fatal(err)
		}
		return m
	}
	return memory.Exchange{
		ID:       id,
		Identity: memory.Identity{Tenant: "t1", User: "u1", Conversation: "c1"},
		Model:    "gpt-4o",
		Turn:     []memory.Message{msg("user", userText)},
		Reply:    msg("assistant", replyText),
		At:       time.Now().UTC(),
	}
}

// pending reports how many entries q holds, queued or claimed.
func pending(tb testing.TB, q *record.MemoryQueue) int64 {
	tb.Helper()
	n, err := q.Pending(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// value reads a counter or gauge (summed over a vector's series).
func value(tb testing.TB, c prometheus.Collector) float64 {
	tb.Helper()
	ch := make(chan prometheus.Metric, 16)
	c.Collect(ch)
	close(ch)
	total := 0.0
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			tb.Fatal(err)
		}
		switch {
		case d.Counter != nil:
			total += d.Counter.GetValue()
		case d.Gauge != nil:
			total += d.Gauge.GetValue()
		}
	}
	return total
}

// histCount reads a histogram's observation count.
func histCount(tb testing.TB, h prometheus.Histogram) uint64 {
	tb.Helper()
	var d dto.Metric
	if err := h.Write(&d); err != nil {
		tb.Fatal(err)
	}
	return d.Histogram.GetSampleCount()
}

// countingSaver stores nothing and reports each exchange's turn and reply
// inserted.
type countingSaver struct{}

func (countingSaver) SaveExchange(_ context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	return memory.SaveResult{Inserted: len(ex.Turn) + 1}, nil
}
