package cache_test

import (
	"context"
	"errors"
	"testing"

	"github.com/memgate/memgate/internal/engine/cache"
)

// TestCallsForgetCancelsTheOwnersCallsBeforeItReturns: a forget of an
// owner has cancelled, with cause ErrErased, every call in flight
// carrying their text by the time it returns; another owner's calls go
// on, and a call over once it ended is not cancelled by a later forget.
func TestCallsForgetCancelsTheOwnersCallsBeforeItReturns(t *testing.T) {
	c := cache.NewCalls()
	noor, omar := cache.Owner{Tenant: "t", User: "noor"}, cache.Owner{Tenant: "t", User: "omar"}
	ctx := context.Background()
	hers, endHers, err := c.Begin(ctx, noor)
	if err != nil {
		t.Fatal(err)
	}
	defer endHers()
	both, endBoth, err := c.Begin(ctx, omar, noor)
	if err != nil {
		t.Fatal(err)
	}
	defer endBoth()
	his, endHis, err := c.Begin(ctx, omar)
	if err != nil {
		t.Fatal(err)
	}
	defer endHis()
	done, endDone, err := c.Begin(ctx, noor)
	if err != nil {
		t.Fatal(err)
	}
	endDone()

	c.Forget("t", "noor")
	for name, cctx := range map[string]context.Context{"noor's call": hers, "the call carrying both": both} {
		if !errors.Is(context.Cause(cctx), cache.ErrErased) {
			t.Errorf("%s after noor's forget returned: cause %v, want ErrErased", name, context.Cause(cctx))
		}
	}
	if his.Err() != nil {
		t.Errorf("omar's call was cancelled by noor's forget: %v", context.Cause(his))
	}
	if errors.Is(context.Cause(done), cache.ErrErased) {
		t.Error("a call over before the forget was cancelled by it")
	}
}

// TestCallsRefuseTextReadBeforeAForget: a call whose text was read at an
// epoch before its owner's forget (an enrichment round's) is refused; one
// read after it, or of another owner, is made.
func TestCallsRefuseTextReadBeforeAForget(t *testing.T) {
	c := cache.NewCalls()
	noor, omar := cache.Owner{Tenant: "t", User: "noor"}, cache.Owner{Tenant: "t", User: "omar"}
	read := cache.WithEpoch(context.Background(), cache.Epoch())
	c.Forget("t", "noor")
	if _, _, err := c.Begin(read, noor); !errors.Is(err, cache.ErrErased) {
		t.Errorf("a call of noor's text read before her forget: %v, want ErrErased", err)
	}
	if _, _, err := c.Begin(read, omar, noor); !errors.Is(err, cache.ErrErased) {
		t.Errorf("a call carrying noor's text among others read before her forget: %v, want ErrErased", err)
	}
	if _, end, err := c.Begin(read, omar); err != nil {
		t.Errorf("a call of omar's text: %v", err)
	} else {
		end()
	}
	after := cache.WithEpoch(context.Background(), cache.Epoch())
	if _, end, err := c.Begin(after, noor); err != nil {
		t.Errorf("a call of noor's text read after her forget: %v", err)
	} else {
		end()
	}
	c.Clear()
	if _, _, err := c.Begin(after, omar); !errors.Is(err, cache.ErrCleared) {
		t.Errorf("a call read before a clear: %v, want ErrCleared", err)
	}
}

// TestNilCallsKeepNone: the nil Calls refuses no call and cancels none.
func TestNilCallsKeepNone(t *testing.T) {
	var c *cache.Calls
	ctx, end, err := c.Begin(context.Background(), cache.Owner{Tenant: "t", User: "noor"})
	if err != nil {
		t.Fatal(err)
	}
	c.Forget("t", "noor")
	c.Clear()
	if ctx.Err() != nil {
		t.Errorf("cancelled: %v", ctx.Err())
	}
	end()
}
