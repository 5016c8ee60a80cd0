package memory_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

func TestMemoReadsOncePerKey(t *testing.T) {
	ctx := memory.WithMemo(context.Background())
	memo := memory.MemoFrom(ctx)
	if memo == nil {
		t.Fatal("no memo in a context made by WithMemo")
	}
	if memory.MemoFrom(context.Background()) != nil {
		t.Fatal("a memo in a plain context")
	}
	var reads atomic.Int32
	release := make(chan struct{})
	read := func() (any, error) {
		reads.Add(1)
		<-release
		return "value", nil
	}
	var wg sync.WaitGroup
	got := make([]any, 8)
	for i := range got {
		wg.Go(func() {
			v, err := memo.Do(ctx, "k", read)
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		})
	}
	close(release)
	wg.Wait()
	if n := reads.Load(); n != 1 {
		t.Fatalf("%d reads for one key, want 1", n)
	}
	for i, v := range got {
		if v != "value" {
			t.Fatalf("caller %d got %v", i, v)
		}
	}
	if v, _ := memo.Do(ctx, "other", func() (any, error) { return 2, nil }); v != 2 {
		t.Fatalf("another key answered %v", v)
	}
	// A new request reads again.
	again := memory.MemoFrom(memory.WithMemo(context.Background()))
	if _, err := again.Do(ctx, "k", read); err != nil || reads.Load() != 2 {
		t.Fatalf("a new memo did not read: %d reads, %v", reads.Load(), err)
	}
}

func TestMemoDoesNotKeepFailures(t *testing.T) {
	ctx := memory.WithMemo(context.Background())
	memo := memory.MemoFrom(ctx)
	boom := errors.New("boom")
	if _, err := memo.Do(ctx, "k", func() (any, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	v, err := memo.Do(ctx, "k", func() (any, error) { return 1, nil })
	if err != nil || v != 1 {
		t.Fatalf("after a failure: %v, %v; want a new read", v, err)
	}
}

func TestMemoWaiterLeavesWithItsContext(t *testing.T) {
	ctx := memory.WithMemo(context.Background())
	memo := memory.MemoFrom(ctx)
	started, release := make(chan struct{}), make(chan struct{})
	go memo.Do(ctx, "k", func() (any, error) { close(started); <-release; return 1, nil })
	<-started
	wctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := memo.Do(wctx, "k", func() (any, error) { return 2, nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("waiter with a cancelled context: %v", err)
	}
	close(release)
}
