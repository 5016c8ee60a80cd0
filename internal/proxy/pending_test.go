package proxy

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// heldCapture is a capture holding one message of size bytes.
func heldCapture(size int) *exchangeCapture {
	return &exchangeCapture{msgs: []memory.Message{{Role: "user", Content: strings.Repeat("x", size)}}}
}

// TestPendingResponsesBounded: the held captures are bounded in count
// and bytes, the oldest given up first, expire after pendingTTL, are
// claimed once, and forgotten with their user.
func TestPendingResponsesBounded(t *testing.T) {
	now := time.Unix(1764770000, 0)
	var lost int
	p := newPendingResponses(func() time.Time { return now }, func(*exchangeCapture) { lost++ })
	key := func(i int) pendingKey { return pendingKey{"t", "resp_" + strconv.Itoa(i)} }

	for i := range pendingMax + 1 {
		p.hold(key(i), "u", heldCapture(10))
	}
	if lost != 1 || p.has(key(0), "u") || !p.has(key(1), "u") || !p.has(key(pendingMax), "u") {
		t.Fatalf("over the count: lost %d, oldest held %v", lost, p.has(key(0), "u"))
	}

	p = newPendingResponses(func() time.Time { return now }, func(*exchangeCapture) { lost++ })
	lost = 0
	big := memory.HeldExchangeMaxBytes - 64
	fit := pendingMaxBytes / memory.HeldExchangeMaxBytes
	for i := range fit + 1 {
		if !p.hold(key(i), "u", heldCapture(big)) {
			t.Fatalf("capture %d of the largest size not held", i)
		}
	}
	if lost != 1 || p.has(key(0), "u") || !p.has(key(fit), "u") {
		t.Fatalf("over the bytes: lost %d", lost)
	}
	if p.hold(key(99), "u", heldCapture(memory.HeldExchangeMaxBytes+1)) || lost != 1 || p.has(key(99), "u") || !p.has(key(1), "u") {
		t.Fatalf("a capture over memory.HeldExchangeMaxBytes held, or evicted another: lost %d", lost)
	}
	lost++ // as the caller counts it

	if c := p.claim(key(1)); c == nil {
		t.Fatal("not claimed")
	}
	if c := p.claim(key(1)); c != nil {
		t.Fatal("claimed twice")
	}

	now = now.Add(pendingTTL)
	if p.has(key(2), "u") || p.claim(key(2)) != nil || lost != 3 {
		t.Fatalf("an expired capture was claimed: lost %d", lost)
	}

	p.hold(pendingKey{"t", "a"}, "ana", heldCapture(1))
	p.hold(pendingKey{"t", "b"}, "bob", heldCapture(1))
	p.hold(pendingKey{"u", "c"}, "ana", heldCapture(1))
	if taken := p.take("t", "ana"); len(taken) != 1 || taken[0].key != (pendingKey{"t", "a"}) {
		t.Errorf("take returned %d captures, want t's a", len(taken))
	}
	if p.has(pendingKey{"t", "a"}, "ana") || !p.has(pendingKey{"t", "b"}, "bob") || !p.has(pendingKey{"u", "c"}, "ana") {
		t.Error("take removed the wrong captures")
	}
}
