package redis

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// roundTrips counts the calls a client makes to Redis: one per command,
// one per pipeline or MULTI.
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmds)
	}
}

var _ redis.Hook = (*roundTrips)(nil)

// TestQueueRoundTrips: each enqueue is one round trip however many
// payloads it carries; a claim reads a batch's payloads in one more
// (pipelined with the stale entries' delivery counts), not one per entry;
// an acknowledgement is one.
func TestQueueRoundTrips(t *testing.T) {
	ctx := context.Background()
	for _, maxLen := range []int64{0, 1000} {
		t.Run(fmt.Sprint("MaxLen ", maxLen), func(t *testing.T) {
			q := mustQueue(t, QueueConfig{MaxLen: maxLen})
			// Load the scripts, so that no call below pays for it.
			if err := q.Enqueue(ctx, []byte("warm")); err != nil {
				t.Fatal(err)
			}
			ds, err := q.Claim(ctx, "warm", 1, time.Hour, 0)
			if err != nil || len(ds) != 1 {
				t.Fatalf("Claim = %d, %v", len(ds), err)
			}
			if err := q.Ack(ctx, ds[0].ID); err != nil {
				t.Fatal(err)
			}
			var rt roundTrips
			q.rdb.AddHook(&rt)
			count := func(what string, want int64, f func() error) {
				t.Helper()
				before := rt.n.Load()
				if err := f(); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if got := rt.n.Load() - before; got != want {
					t.Errorf("%s took %d round trips, want %d", what, got, want)
				}
			}
			count("Enqueue", 1, func() error { return q.Enqueue(ctx, []byte("a")) })
			count("EnqueueTurn", 1, func() error { return q.EnqueueTurn(ctx, "x", []byte("b")) })
			batch := make([][]byte, 30)
			for i := range batch {
				batch[i] = fmt.Appendf(nil, "c%d", i)
			}
			count("EnqueueBatch of 30", 1, func() error { return q.EnqueueBatch(ctx, batch) })
			var first []string
			count("Claim of 16 new entries", 1, func() error { // claimScript
				ds, err := q.Claim(ctx, "w1", 16, time.Hour, 0)
				for _, d := range ds {
					first = append(first, d.ID)
				}
				if err == nil && len(ds) != 16 {
					err = fmt.Errorf("claimed %d", len(ds))
				}
				return err
			})
			count("Claim of 16 stale entries", 1, func() error { // claimScript
				ds, err := q.Claim(ctx, "w2", 16, 0, 0)
				if err == nil && len(ds) != 16 {
					err = fmt.Errorf("claimed %d", len(ds))
				}
				return err
			})
			count("Ack of 16", 1, func() error { return q.Ack(ctx, first...) })
		})
	}
}
