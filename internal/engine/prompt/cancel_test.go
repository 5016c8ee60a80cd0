package prompt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// cancellingCounter is byteCounter that ends the request's context at its
// cancelAt-th call (the deadline passing mid-assembly) and counts the calls
// that reach it after that.
type cancellingCounter struct {
	byteCounter
	cancel   context.CancelFunc
	cancelAt int64
	calls    atomic.Int64
	after    atomic.Int64
}

func (c *cancellingCounter) tick() {
	n := c.calls.Add(1)
	switch {
	case n == c.cancelAt:
		c.cancel()
	case c.cancelAt > 0 && n > c.cancelAt:
		c.after.Add(1)
	}
}

func (c *cancellingCounter) Messages(model string, msgs []json.RawMessage) int {
	c.tick()
	return c.byteCounter.Messages(model, msgs)
}

func (c *cancellingCounter) RawMessage(model string, raw json.RawMessage) int {
	c.tick()
	return c.byteCounter.RawMessage(model, raw)
}

func (c *cancellingCounter) Message(model string, m memory.Message) int {
	c.tick()
	return c.byteCounter.Message(model, m)
}

func (c *cancellingCounter) Text(model, s string) int {
	c.tick()
	return c.byteCounter.Text(model, s)
}

func (c *cancellingCounter) SystemMessage(model, text string) int {
	c.tick()
	return c.byteCounter.SystemMessage(model, text)
}

// longConversation is a client's full history of n turns and a new one.
func longConversation(t *testing.T, n int) memory.Request {
	var raws []string
	for i := range n {
		raws = append(raws, fmt.Sprintf(`{"role":"user","content":"question %d about the budget"}`, i),
			fmt.Sprintf(`{"role":"assistant","content":"answer %d about the budget"}`, i))
	}
	raws = append(raws, `{"role":"user","content":"and the total?"}`)
	return request(t, memory.ModeOn, raws...)
}

// Once the request's context ends mid-assembly, Prepare counts nothing
// more — the tokenizing of an abandoned request stops within the text
// being counted — and reports the cancellation instead of a prompt.
func TestPrepareStopsCountingWhenCancelled(t *testing.T) {
	req := longConversation(t, 300)
	// Uncancelled, the assembly counts hundreds of times.
	full := &cancellingCounter{}
	a, err := NewAssembler(Deps{History: &fakeHistory{}, Counter: full}, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Prepare(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if full.calls.Load() < 100 {
		t.Fatalf("the uncancelled assembly counted %d times: the test needs a longer one", full.calls.Load())
	}
	for _, at := range []int64{1, 2, 10, full.calls.Load() / 2, full.calls.Load() - 1} {
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			c := &cancellingCounter{cancel: cancel, cancelAt: at}
			a, err := NewAssembler(Deps{History: &fakeHistory{}, Counter: c}, Options{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = a.Prepare(ctx, req)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Prepare after cancellation: %v, want context.Canceled", err)
			}
			if c.after.Load() != 0 {
				t.Errorf("%d counts after the context ended (at call %d of %d)", c.after.Load(), at, full.calls.Load())
			}
		})
	}
}

// blockingRecaller holds recall until its context ends, then reports that
// it returned.
type blockingRecaller struct {
	started chan struct{}
	done    chan struct{}
}

func (r *blockingRecaller) Recall(ctx context.Context, _ memory.RecallQuery) (memory.Recalled, error) {
	close(r.started)
	<-ctx.Done()
	close(r.done)
	return memory.Recalled{}, ctx.Err()
}

// A request abandoned while memory loads assembles nothing, and the load's
// parts are told to stop: their goroutines return.
func TestPrepareCancelledWhileLoading(t *testing.T) {
	rec := &blockingRecaller{started: make(chan struct{}), done: make(chan struct{})}
	c := &cancellingCounter{}
	a, err := NewAssembler(Deps{History: &fakeHistory{}, Recaller: rec, Counter: c},
		Options{LoadTimeout: time.Hour, EmbedTimeout: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-rec.started; cancel() }()
	if _, err := a.Prepare(ctx, longConversation(t, 50)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Prepare: %v, want context.Canceled", err)
	}
	if n := c.calls.Load(); n != 0 {
		t.Errorf("%d counts for a request cancelled while loading", n)
	}
	select {
	case <-rec.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the recall part still runs 30s after its request was cancelled")
	}
}
