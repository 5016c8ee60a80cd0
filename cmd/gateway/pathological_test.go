package main

import (
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/memgate/memgate/bench/pathological"
	"github.com/memgate/memgate/internal/config"
)

// hostileWork is what one request cost the gateway, counted: bytes
// tokenized and rank lookups (tokens.Counter.Work), and bytes and objects
// allocated by the whole process (capture and enrichment included).
type hostileWork struct {
	tokenized, lookups int64
	allocBytes, allocs uint64
}

// measure sends body through g and counts its work until g settles.
func (g *hostileGateway) measure(t *testing.T, body []byte, base int) (hostileWork, http.Header) {
	t.Helper()
	var m0, m1 runtime.MemStats
	w0 := g.counter.Work()
	runtime.ReadMemStats(&m0)
	st, h := g.send(t, body)
	if st != http.StatusOK {
		t.Fatalf("status %d", st)
	}
	g.settle(t, base, 5*time.Minute)
	runtime.ReadMemStats(&m1)
	w1 := g.counter.Work()
	return hostileWork{
		tokenized: w1.Bytes - w0.Bytes, lookups: w1.Lookups - w0.Lookups,
		allocBytes: m1.TotalAlloc - m0.TotalAlloc, allocs: m1.Mallocs - m0.Mallocs,
	}, h
}

// TestHostileInputsCostLinearWork sends every input of the hostile corpus
// (issue 24: long runs of one character class, repeated token prefixes,
// digit runs, unclosed quotes, nested JSON, many tool calls, many tiny
// messages) through the whole gateway with memory on — SQLite, capture,
// enrichment — and bounds what each costs by its size, counted, never
// timed, from the request to the end of its capture and enrichment: each
// byte tokenized a few times at most with at most three rank lookups a
// byte tokenized, and the bytes and objects the process allocated within
// a constant per byte of the request. The constants leave room for the
// paths a busy machine's timeouts choose (a quadratic step on a 240 KB
// input would be thousands of times over them); the tokens package's
// tests check that doubling a text doubles its lookups.
func TestHostileInputsCostLinearWork(t *testing.T) {
	inputs := pathological.Inputs()
	if testing.Short() {
		inputs = inputs[:0]
		for _, name := range []string{"letters", "jwt-prefix", "tiny-messages"} {
			in, _ := pathological.Find(name)
			inputs = append(inputs, in)
		}
	}
	// The default embedder (the built-in encoder) and the fast one (local,
	// hashed words and trigrams) each see every input.
	for _, provider := range []string{"", "local"} {
		for _, in := range inputs {
			name := in.Name
			if provider != "" {
				name += "/" + provider
			}
			t.Run(name, func(t *testing.T) { hostileCostsLinearWork(t, in, provider) })
		}
	}
}

// hostileCostsLinearWork sends one hostile input through a gateway whose
// embedder is provider (empty: the default) and checks its counted work.
func hostileCostsLinearWork(t *testing.T, in pathological.Input, provider string) {
	t.Helper()
	// A deadline that does not pass, so Prepare's work is all counted.
	g := startHostileGateway(t, func(c *config.Config) {
		c.Memory.LoadTimeout = config.Duration(time.Minute)
		if provider != "" {
			c.Recall.Embeddings.Provider = provider
		}
	})
	w, h := g.measure(t, in.Body, g.idleGoroutines(t))
	size := int64(len(in.Body))
	// Sizes in MB: a bare count of bytes (eight digits) was once read as
	// gigabytes, a thousand times what was allocated.
	t.Logf("%d bytes: tokenized %d (%.1f×), %d lookups, allocated %.1f MB (%.0f× the request) in %d objects; degraded %q",
		size, w.tokenized, float64(w.tokenized)/float64(size), w.lookups, float64(w.allocBytes)/1e6,
		float64(w.allocBytes)/float64(size), w.allocs, h.Get("X-Memory-Degraded"))
	if w.tokenized > 4*size {
		t.Errorf("tokenized %d bytes for a %d-byte request", w.tokenized, size)
	}
	if w.lookups > 3*w.tokenized {
		t.Errorf("%d rank lookups for %d bytes tokenized", w.lookups, w.tokenized)
	}
	// The bound covers the capture's enrichment too (the harness settles
	// after it); the race detector multiplies allocations (raceAllocFactor).
	if limit := int64(2000 * raceAllocFactor); w.allocBytes > uint64(limit*size) {
		t.Errorf("allocated %.1f MB (%.0f×) for a %d-byte request, over %d×", float64(w.allocBytes)/1e6, float64(w.allocBytes)/float64(size), size, limit)
	}
	if w.allocs > uint64(20*size) {
		t.Errorf("allocated %d objects for a %d-byte request", w.allocs, size)
	}
}
