package enrich

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

func TestBreakerOpensAndRecovers(t *testing.T) {
	down := errors.New("503")
	inner := &fakeSummarizer{err: down}
	// Open long enough that a busy machine's pause of a second or so
	// before the third call does not half-open it (a probe would reach
	// the summariser).
	b := NewBreaker(inner, 2, 2*time.Second)
	in := Input{Messages: []memory.Message{{Role: "user", Content: "hi"}}, MaxTokens: 10}
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if _, err := b.Summarize(ctx, in); !errors.Is(err, down) {
			t.Fatalf("call %d: err = %v", i, err)
		}
	}
	if _, err := b.Summarize(ctx, in); !errors.Is(err, ErrBreakerOpen) || !b.Open() {
		t.Fatalf("err = %v, want ErrBreakerOpen", err)
	}
	if inner.calls != 2 {
		t.Fatalf("an open breaker called the summariser: %d calls", inner.calls)
	}
	inner.mu.Lock()
	inner.err = nil
	inner.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, err := b.Summarize(ctx, in)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrBreakerOpen) || time.Now().After(deadline) {
			t.Fatalf("breaker did not recover: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if b.Open() {
		t.Fatal("breaker still open after a successful probe")
	}
}

func TestBreakerIgnoresCancellation(t *testing.T) {
	inner := &fakeSummarizer{err: context.Canceled}
	b := NewBreaker(inner, 1, time.Hour)
	for i := 0; i < 3; i++ {
		if _, err := b.Summarize(context.Background(), Input{}); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	}
	if b.Open() {
		t.Fatal("cancellations opened the breaker")
	}
}
