package redis

import (
	"context"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/storetest"
)

var _ storetest.InspectStore = Cached{}

func TestCacheInspectContract(t *testing.T) {
	storetest.RunInspect(t, func(t *testing.T) storetest.InspectStore {
		return contractCache(t)
	})
}

// TestFootprintCountsCachedWindows: the footprint includes the user's
// conversation windows held in Redis, and erasure leaves none.
func TestFootprintCountsCachedWindows(t *testing.T) {
	c := contractCache(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	turn, _ := memory.ParseMessage([]byte(`{"role":"user","content":"hello"}`))
	reply, _ := memory.ParseMessage([]byte(`{"role":"assistant","content":"hi"}`))
	if _, err := c.SaveExchange(ctx, memory.Exchange{ID: "e1", Identity: id, Turn: []memory.Message{turn}, Reply: reply, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	msgs, err := c.Recent(ctx, id, 6)
	if err != nil {
		t.Fatal(err)
	}
	c.Tails.KeepTail(ctx, id, 2, msgs, true)
	fp, err := c.Footprint(ctx, "acme", "alice")
	if err != nil || fp.CachedWindows != 1 || fp.Messages != 2 {
		t.Fatalf("Footprint = %+v, %v; want 1 cached window and 2 messages", fp, err)
	}
	if err := c.DeleteUser(ctx, "acme", "alice"); err != nil {
		t.Fatal(err)
	}
	if fp, err := c.Footprint(ctx, "acme", "alice"); err != nil || !fp.Empty() {
		t.Fatalf("Footprint after erasure = %+v, %v", fp, err)
	}
}
