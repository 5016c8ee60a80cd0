package encoder

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// heapLive is the bytes of live heap objects after a collection.
func heapLive() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// skipUnlessMapping skips tb where memory cannot be mapped (the weights
// are then on the heap).
func skipUnlessMapping(tb testing.TB) {
	tb.Helper()
	b, ok := mapBytes(offHeapBytes)
	if !ok {
		tb.Skip("no memory mapping on this system: the weights are on the heap")
	}
	unmapMapping(b)
}

// TestModelWeightsLiveOffTheHeap: a loaded model adds little to the Go
// heap (its ~44 MB of tensors are mapped outside it, so they do not raise
// the collector's goal), and nothing of its load is left behind.
func TestModelWeightsLiveOffTheHeap(t *testing.T) {
	skipUnlessMapping(t)
	before := heapLive()
	m, err := Load(modelAsset)
	if err != nil {
		t.Fatal(err)
	}
	grown := int64(heapLive()) - int64(before)
	runtime.KeepAlive(m)
	if grown > 8<<20 {
		t.Fatalf("a loaded model holds %d MB of Go heap, want under 8 (the weights belong off the heap)", grown>>20)
	}
	if got := m.Embed([]string{"still works"}); len(got[0]) != Dims {
		t.Fatalf("%d dims", len(got[0]))
	}
}

// TestModelWeightsAreReadOnly: a write to a loaded model's weights faults
// (here a panic, with SetPanicOnFault) instead of changing every later
// vector.
func TestModelWeightsAreReadOnly(t *testing.T) {
	skipUnlessMapping(t)
	m := mustDefault(t)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	for name, write := range map[string]func(){
		"embeddings":       func() { m.emb.data[100] = 1 },
		"first layer W2ᵀ":  func() { m.l0.ffn2T.data[100] = 1 },
		"input table":      func() { m.in.embQKV.data[100] = 1 },
		"second layer qkv": func() { m.l1.qkvW.data[100] = 1 },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: a write did not fault", name)
				}
			}()
			write()
		}()
	}
}

// TestEmbedWorkingMemoryIsBounded: a call's working memory does not grow
// with its batch (it computes a text's worth of pieces at a time), and
// calls reuse it (pooled scratch). Computing a batch at once took about
// 38 KB a piece, 5 MB a text of MaxTokens pieces, allocated by every call.
func TestEmbedWorkingMemoryIsBounded(t *testing.T) {
	m, err := Load(modelAsset) // a pool of its own, empty
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("the quick brown fox jumps over the lazy dog ", 15)
	if n := len(m.Tokenizer().Encode(long)); n < MaxTokens {
		t.Fatalf("a text of %d pieces, want at least %d", n, MaxTokens)
	}
	allocated := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	// Tokenizing takes about 100 KB a text of this length; a scratch about
	// 5 MB, allocated again should the pool have dropped it.
	batch := []string{long, long, long, long, long, long, long, long, long, long, long, long, long, long, long, long}
	if got := allocated(func() { m.Embed(batch) }); got > 12<<20 {
		t.Errorf("embedding %d texts of %d pieces allocated %d MB, want under 12", len(batch), MaxTokens, got>>20)
	}
	if got := allocated(func() {
		for range 8 {
			m.Embed([]string{long})
		}
	}); got > 12<<20 {
		t.Errorf("8 calls of a text of %d pieces allocated %d MB, want under 12", MaxTokens, got>>20)
	}
}
