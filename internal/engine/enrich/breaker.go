package enrich

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sony/gobreaker/v2"
)

// ErrBreakerOpen reports that the summariser was not called because its
// circuit breaker is open after repeated failures.
var ErrBreakerOpen = errors.New("summariser circuit breaker open")

// Breaker is a Summarizer guarded by a circuit breaker: after failures
// consecutive failed calls it stops calling the wrapped summariser for
// openFor, failing at once with ErrBreakerOpen, then lets one probe through.
// Cancellations of the caller's context are not counted against the
// summariser. It is safe for concurrent use.
type Breaker struct {
	next Summarizer
	cb   *gobreaker.CircuitBreaker[Output]
}

// NewBreaker wraps next in a circuit breaker (failures ≥ 1).
func NewBreaker(next Summarizer, failures uint32, openFor time.Duration) *Breaker {
	failures = max(failures, 1)
	return &Breaker{
		next: next,
		cb: gobreaker.NewCircuitBreaker[Output](gobreaker.Settings{
			Name:        "summariser",
			MaxRequests: 1,
			Timeout:     openFor,
			ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= failures },
			IsExcluded:  func(err error) bool { return errors.Is(err, context.Canceled) },
		}),
	}
}

// Summarize calls the wrapped summariser unless the breaker is open.
func (b *Breaker) Summarize(ctx context.Context, in Input) (Output, error) {
	out, err := b.cb.Execute(func() (Output, error) { return b.next.Summarize(ctx, in) })
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return Output{}, fmt.Errorf("%w: %w", ErrBreakerOpen, err)
	}
	return out, err
}

// Open reports whether the breaker is open (calls fail without reaching the
// summariser).
func (b *Breaker) Open() bool { return b.cb.State() == gobreaker.StateOpen }
