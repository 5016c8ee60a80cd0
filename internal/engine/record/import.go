package record

import (
	"context"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// Outcome is what became of one exchange handed to Import.
type Outcome int

// The outcomes of an imported exchange.
const (
	// Failed: not stored — dropped (buffer full, shutdown) or refused by the
	// store for good (set aside as a dead letter).
	Failed Outcome = iota
	// Stored: saved in its conversation now.
	Stored
	// Duplicate: an exchange with its ID was stored before; nothing changed.
	Duplicate
	// Erased: the store discarded it because its user was erased at or after
	// its At.
	Erased
	// Queued: the store failed, and it waits in the durable capture queue,
	// where the Worker stores it.
	Queued
)

// String names the outcome.
func (o Outcome) String() string {
	switch o {
	case Stored:
		return "stored"
	case Duplicate:
		return "duplicate"
	case Erased:
		return "erased"
	case Queued:
		return "queued"
	}
	return "failed"
}

// Import stores exchanges of past history through the same path as Capture
// — sanitized, redacted, stored through their conversation's lane (in the
// order given, grouped into transactions), set aside when refused, and
// handed to enrichment (indexing, facts, summaries) once stored — with two
// differences: it keeps each exchange's ID, which the caller derives
// deterministically (so importing the same history again stores nothing
// twice: the store reports the exchange a Duplicate), and it waits, bounded
// only by ctx, until every exchange is durable, reporting what became of
// each (outcomes[i] is exs[i]'s). An exchange's At (when it happened; zero
// means now) decides whether its user's erasure drops it, and its messages'
// CreatedAt are the times they were said. An At after the import began
// (a client's clock ahead of the gateway's) is taken as when it began:
// the history is what the user said before the import, and an erasure
// that lands while it is stored drops all of it.
//
// Every exchange must have an ID. When ctx ends first, Import returns the
// outcomes known so far (the rest Failed) with ctx's error; the exchanges
// handed on are stored anyway.
func (c *Capturer) Import(ctx context.Context, exs []memory.Exchange) ([]Outcome, error) {
	for i, ex := range exs {
		if ex.ID == "" {
			return nil, fmt.Errorf("import exchange %d: %w: no id", i, memory.ErrInvalid)
		}
	}
	start := time.Now()
	jobs := make([]*job, 0, len(exs))
	outcomes := make([]Outcome, len(exs))
	for _, ex := range exs {
		if ex.At.IsZero() || ex.At.After(start) {
			ex.At = start.UTC()
		}
		if ex.Received.IsZero() {
			ex.Received = start.UTC()
		}
		ex, err := c.prepare(ex)
		if err != nil {
			c.metrics.failures.WithLabelValues("encode").Inc()
			c.drop(ctx, ex, "cannot encode: "+err.Error())
			jobs = append(jobs, nil)
			continue
		}
		j := newJob(ex, start)
		if !c.submit(ctx, j) {
			jobs = append(jobs, nil)
			continue
		}
		jobs = append(jobs, j)
	}
	for i, j := range jobs {
		if j == nil {
			continue
		}
		select {
		case <-j.done:
			outcomes[i] = j.outcome
		case <-ctx.Done():
			return outcomes, fmt.Errorf("import: waiting for exchange %d of %d: %w", i+1, len(exs), ctx.Err())
		}
	}
	return outcomes, nil
}
