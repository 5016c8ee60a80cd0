package recall

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gateEmbedder is an in-process embedder whose calls block until release
// is closed (when set), recording how many cores its calls take at once,
// and each call's size and cores.
type gateEmbedder struct {
	release chan struct{}
	entered chan struct{} // one send per call started (buffered)
	running atomic.Int32  // cores of the calls running
	peak    atomic.Int32
	mu      sync.Mutex
	sizes   []int
	cores   []int
}

var _ InProcess = (*gateEmbedder)(nil)

func (g *gateEmbedder) Embed(ctx context.Context, texts []string, _ time.Time) ([][]float32, error) {
	return g.EmbedOn(ctx, texts, 1)
}

func (g *gateEmbedder) EmbedOn(ctx context.Context, texts []string, cores int) ([][]float32, error) {
	n := g.running.Add(int32(cores))
	defer g.running.Add(-int32(cores))
	for {
		p := g.peak.Load()
		if n <= p || g.peak.CompareAndSwap(p, n) {
			break
		}
	}
	g.mu.Lock()
	g.sizes = append(g.sizes, len(texts))
	g.cores = append(g.cores, cores)
	g.mu.Unlock()
	if g.entered != nil {
		g.entered <- struct{}{}
	}
	if g.release != nil {
		<-g.release
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = []float32{float32(len(t))}
	}
	return out, nil
}

func (g *gateEmbedder) Model() string { return "gate" }
func (g *gateEmbedder) Dims() int     { return 1 }

var _ Embedder = (*Bounded)(nil)

func TestBoundedQueryGivesUpAtItsDeadlineWhenSaturated(t *testing.T) {
	g := &gateEmbedder{release: make(chan struct{}), entered: make(chan struct{}, 4)}
	b := NewBounded(g, 1, 8)
	// A query holds the only slot.
	holder := make(chan error, 1)
	go func() {
		_, err := b.Embed(context.Background(), []string{"first"}, time.Now().Add(time.Hour))
		holder <- err
	}()
	<-g.entered
	// Another query waits no longer than its deadline.
	_, err := b.Embed(context.Background(), []string{"second"}, time.Now().Add(20*time.Millisecond))
	if !errors.Is(err, ErrEmbeddingLate) {
		t.Fatalf("saturated query: err = %v, want ErrEmbeddingLate", err)
	}
	// A query whose deadline has passed fails at once, too.
	if _, err := b.Embed(context.Background(), []string{"third"}, time.Now().Add(-time.Second)); !errors.Is(err, ErrEmbeddingLate) {
		t.Fatalf("past deadline: err = %v, want ErrEmbeddingLate", err)
	}
	close(g.release)
	if err := <-holder; err != nil {
		t.Fatalf("holder: %v", err)
	}
	// Free again, a query embeds.
	vecs, err := b.Embed(context.Background(), []string{"four"}, time.Now().Add(time.Hour))
	if err != nil || len(vecs) != 1 || vecs[0][0] != 4 {
		t.Fatalf("free query: %v, %v", vecs, err)
	}
}

func TestBoundedBackgroundBatchesInOrder(t *testing.T) {
	g := &gateEmbedder{}
	b := NewBounded(g, 2, 3)
	texts := []string{"a", "bb", "ccc", "dddd", "eeeee", "ffffff", "g"}
	vecs, err := b.Embed(context.Background(), texts, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vecs {
		if int(v[0]) != len(texts[i]) {
			t.Fatalf("vector %d = %v, want %d", i, v, len(texts[i]))
		}
	}
	if want := []int{3, 3, 1}; len(g.sizes) != len(want) || g.sizes[0] != 3 || g.sizes[1] != 3 || g.sizes[2] != 1 {
		t.Fatalf("batches %v, want %v", g.sizes, want)
	}
}

func TestBoundedBackgroundLeavesAQuerySlot(t *testing.T) {
	g := &gateEmbedder{release: make(chan struct{}), entered: make(chan struct{}, 8)}
	b := NewBounded(g, 2, 8)
	var wg sync.WaitGroup
	for range 3 { // three indexing calls at once: one runs, two wait
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.Embed(context.Background(), []string{"index me"}, time.Time{}); err != nil {
				t.Error(err)
			}
		}()
	}
	<-g.entered
	// The second slot is the query's: it gets in while indexing holds one.
	done := make(chan error, 1)
	go func() {
		_, err := b.Embed(context.Background(), []string{"query"}, time.Now().Add(time.Hour))
		done <- err
	}()
	<-g.entered
	if got := g.running.Load(); got != 2 {
		t.Fatalf("running = %d, want 2 (one indexing, one query)", got)
	}
	close(g.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if p := g.peak.Load(); p > 2 {
		t.Fatalf("peak concurrency %d, slots 2", p)
	}
}

// TestBoundedQueryTakesIdleCores: a query's batch runs on every slot free
// when it starts; a background batch on one, however many are free.
func TestBoundedQueryTakesIdleCores(t *testing.T) {
	g := &gateEmbedder{release: make(chan struct{}), entered: make(chan struct{}, 8)}
	b := NewBounded(g, 3, 8)
	close(g.release)
	if _, err := b.Embed(context.Background(), []string{"query, idle"}, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Embed(context.Background(), []string{"index, idle"}, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if len(g.cores) != 2 || g.cores[0] != 3 || g.cores[1] != 1 {
		t.Fatalf("cores %v, want [3 1] (the query on all three idle slots, indexing on one)", g.cores)
	}
	// With indexing running, a query takes the slots left.
	g = &gateEmbedder{release: make(chan struct{}), entered: make(chan struct{}, 8)}
	b = NewBounded(g, 3, 8)
	indexed := make(chan error, 1)
	go func() {
		_, err := b.Embed(context.Background(), []string{"index me"}, time.Time{})
		indexed <- err
	}()
	<-g.entered
	queried := make(chan error, 1)
	go func() {
		_, err := b.Embed(context.Background(), []string{"query"}, time.Now().Add(time.Hour))
		queried <- err
	}()
	<-g.entered
	if got := g.running.Load(); got != 3 {
		t.Fatalf("cores running = %d, want 3 (indexing on one, the query on the two left)", got)
	}
	close(g.release)
	if err := errors.Join(<-indexed, <-queried); err != nil {
		t.Fatal(err)
	}
	if g.cores[0] != 1 || g.cores[1] != 2 {
		t.Fatalf("cores %v, want [1 2]", g.cores)
	}
	// Every slot is free again.
	if n := b.spare(); n != 3 {
		t.Fatalf("free slots after the calls: %d, want 3", n)
	}
}

func TestBoundedNeverExceedsSlots(t *testing.T) {
	g := &gateEmbedder{}
	b := NewBounded(g, 3, 2)
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var by time.Time
			if i%2 == 0 {
				by = time.Now().Add(time.Hour)
			}
			if _, err := b.Embed(context.Background(), []string{"x", "yy", "zzz"}, by); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if p := g.peak.Load(); p < 1 || p > 3 {
		t.Fatalf("peak cores in use %d, want 1..3", p)
	}
}

func TestBoundedBackgroundHonoursCancel(t *testing.T) {
	g := &gateEmbedder{release: make(chan struct{}), entered: make(chan struct{}, 4)}
	b := NewBounded(g, 1, 8)
	go b.Embed(context.Background(), []string{"holds the slot"}, time.Time{})
	<-g.entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Embed(ctx, []string{"waits"}, time.Time{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	close(g.release)
}

// TestBoundedQueryBatchesAndStopsAtItsDeadline: a query of many texts runs
// in batches; once its deadline has passed and the slots are busy, it
// stops with ErrEmbeddingLate instead of waiting.
func TestBoundedQueryBatchesAndStopsAtItsDeadline(t *testing.T) {
	g := &gateEmbedder{}
	b := NewBounded(g, 1, 2)
	vecs, err := b.Embed(context.Background(), []string{"a", "bb", "ccc", "dddd", "eeeee"}, time.Now().Add(time.Hour))
	if err != nil || len(vecs) != 5 || vecs[4][0] != 5 {
		t.Fatalf("vecs %v, err %v", vecs, err)
	}
	if len(g.sizes) != 3 || g.sizes[0] != 2 || g.sizes[2] != 1 {
		t.Fatalf("batches %v, want [2 2 1]", g.sizes)
	}
	// Past its deadline with the only slot busy, a query gives up.
	busy := &gateEmbedder{release: make(chan struct{}), entered: make(chan struct{}, 2)}
	b = NewBounded(busy, 1, 2)
	go b.Embed(context.Background(), []string{"indexing"}, time.Time{})
	<-busy.entered
	if _, err := b.Embed(context.Background(), []string{"q", "r", "s"}, time.Now().Add(-time.Millisecond)); !errors.Is(err, ErrEmbeddingLate) {
		t.Fatalf("err = %v, want ErrEmbeddingLate", err)
	}
	close(busy.release)
}
