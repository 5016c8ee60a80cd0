package itemindex

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/ranking"
)

// erasedSource holds one user's item and turn until erase; each read
// takes what it holds, then, until gate closes, tells arrived and waits:
// a read of the store made before an erasure, answered after it.
type erasedSource struct {
	mu      sync.Mutex
	erased  bool
	gate    chan struct{}
	arrived chan string
}

var heldItem1 = memory.Item{ID: 1, Tenant: "acme", User: "alice", Conversation: "c1", Kind: "message", Ref: "m1",
	Text: "my new address is 12 Rua Augusta", Embedding: []float32{1, 0}, Model: "m", Dims: 2}

func (s *erasedSource) erase() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.erased = true
}

// read reports whether the user is still stored, then holds the read.
func (s *erasedSource) read(what string) bool {
	s.mu.Lock()
	stored := !s.erased
	s.mu.Unlock()
	select {
	case <-s.gate:
	default:
		s.arrived <- what
		<-s.gate
	}
	return stored
}

func (s *erasedSource) Load(_ context.Context, key Key, afterID int64, add func(int64, string, string, []byte, []float32) error) error {
	it := heldItem1
	if !s.read("load") || afterID >= it.ID {
		return nil
	}
	if key.Dims == 0 {
		return add(it.ID, it.Conversation, it.Ref, []byte(it.Text), nil)
	}
	return add(it.ID, it.Conversation, it.Ref, nil, slices.Clone(it.Embedding))
}

func (s *erasedSource) LoadItems(_ context.Context, _, _ string, ids []int64) ([]memory.Item, error) {
	if !s.read("items") || !slices.Contains(ids, heldItem1.ID) {
		return nil, nil
	}
	return []memory.Item{heldItem1}, nil
}

func (s *erasedSource) LoadSaidAt(context.Context, string, string, []int64) (map[int64]time.Time, error) {
	return nil, nil
}

func (s *erasedSource) ReadWindows(_ context.Context, _, _ string, refs []memory.MessageRef, radius int) (map[WindowKey][]memory.Message, map[WindowKey]bool, error) {
	if !s.read("windows") {
		return nil, nil, nil
	}
	k := WindowKey{Ref: refs[0], Radius: radius}
	win := []memory.Message{{Conversation: "c1", Key: "m1", Seq: 1, Role: "user", Content: heldItem1.Text}}
	return map[WindowKey][]memory.Message{k: win}, map[WindowKey]bool{k: true}, nil
}

// TestIndexKeepsNothingOfAUserErasedDuringItsReads: what searches of a user
// read before the user's erasure and got after its Forget (vectors,
// full-text index, whole items, turns) is not kept: under revisions no
// request asks for again, it would hold the erased text until evicted.
func TestIndexKeepsNothingOfAUserErasedDuringItsReads(t *testing.T) {
	ctx := context.Background()
	src := &erasedSource{gate: make(chan struct{}), arrived: make(chan string, 8)}
	x := New(src, DefaultLimits)
	rev := memory.Revisions{Added: 1, Messages: 1}
	q := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: []float32{1, 0}, Model: "m", Dims: 2, Limit: 5}
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = x.SearchVector(ctx, rev, q) })
	wg.Go(func() { _, _ = x.SearchText(ctx, rev, q, []string{"address"}) })
	wg.Go(func() { _, _ = x.Items(ctx, rev, "acme", "alice", []ranking.Scored{{ID: 1, Score: 1}}) })
	wg.Go(func() {
		_, _ = x.Around(ctx, rev, "acme", "alice", []memory.MessageRef{{Conversation: "c1", Key: "m1"}}, 1)
	})
	for range 4 {
		<-src.arrived
	}
	src.erase()
	x.Forget("acme", "alice")
	close(src.gate)
	wg.Wait()
	for name, usage := range map[string]func() (int, int){"vectors": x.vectors.Usage, "texts": x.texts.Usage,
		"items": x.items.Usage, "windows": x.windows.Usage} {
		if n, _ := usage(); n != 0 {
			t.Errorf("%s: %d entries held of a user erased while they were read, want none", name, n)
		}
	}
}
