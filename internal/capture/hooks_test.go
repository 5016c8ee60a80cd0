package capture

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// resultSaver returns a fixed result.
type resultSaver struct{ res memory.SaveResult }

func (s resultSaver) SaveExchange(context.Context, memory.Exchange) (memory.SaveResult, error) {
	return s.res, nil
}

func TestWithHooks(t *testing.T) {
	boom := errors.New("embedder down")
	tests := []struct {
		name    string
		res     memory.SaveResult
		hookErr error
		calls   int
		wantErr bool
	}{
		{"stored", memory.SaveResult{Inserted: 2}, nil, 2, false},
		{"duplicate runs hooks again", memory.SaveResult{Duplicate: true}, nil, 2, false},
		{"dropped runs none", memory.SaveResult{Dropped: true}, nil, 0, false},
		{"hook error", memory.SaveResult{Inserted: 2}, boom, 2, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls int
			h := HookFunc(func(context.Context, memory.Exchange, memory.SaveResult) error { calls++; return tt.hookErr })
			_, err := WithHooks(resultSaver{tt.res}, h, h).SaveExchange(context.Background(), memory.Exchange{ID: "x"})
			if calls != tt.calls {
				t.Fatalf("hook calls = %d, want %d", calls, tt.calls)
			}
			if tt.wantErr != (err != nil) || tt.wantErr && (!errors.Is(err, ErrHook) || !errors.Is(err, boom)) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

// TestWorkerGivesUpOnFailingHook: an entry whose hook keeps failing is
// redelivered, then acknowledged after MaxHookAttempts.
func TestWorkerGivesUpOnFailingHook(t *testing.T) {
	q, s := newFakeQueue(), newFakeSaver()
	var calls atomic.Int32
	failing := HookFunc(func(context.Context, memory.Exchange, memory.SaveResult) error {
		calls.Add(1)
		return errors.New("always")
	})
	payload, _ := json.Marshal(exchange(t, "ex1", "hi", "hello"))
	if err := q.Enqueue(context.Background(), payload); err != nil {
		t.Fatal(err)
	}
	w := NewWorker(q, WithHooks(s, failing), nil, WorkerOptions{StaleAfter: time.Millisecond, Block: 5 * time.Millisecond, BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go w.Run(ctx)
	for {
		n, _ := q.Pending(ctx)
		if n == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("entry never acknowledged")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if got := calls.Load(); got != MaxHookAttempts {
		t.Fatalf("hook ran %d times, want %d", got, MaxHookAttempts)
	}
}
