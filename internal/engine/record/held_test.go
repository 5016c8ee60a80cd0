package record

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// memHeld is a HeldStore in memory: a claim leases a row, which stays
// until settled.
type memHeld struct {
	mu     sync.Mutex
	rows   map[string]memory.HeldResponse
	leased map[string]bool
}

func newMemHeld() *memHeld {
	return &memHeld{rows: map[string]memory.HeldResponse{}, leased: map[string]bool{}}
}

func (m *memHeld) HoldResponse(_ context.Context, h memory.HeldResponse) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rows[h.Tenant+"/"+h.ID] = h
	return 0, nil
}

func (m *memHeld) HeldOwner(_ context.Context, tenant, id string, _ time.Time) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.rows[tenant+"/"+id]
	if !ok {
		return nil, memory.ErrNotFound
	}
	return memory.UserTombstone(tenant, h.User), nil
}

func (m *memHeld) ClaimResponse(_ context.Context, tenant, id string, _ []byte, _, _ time.Time) (memory.HeldResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := tenant + "/" + id
	h, ok := m.rows[k]
	if !ok || m.leased[k] {
		return memory.HeldResponse{}, memory.ErrNotFound
	}
	m.leased[k] = true
	return h, nil
}

func (m *memHeld) SettleResponse(_ context.Context, tenant, id string, _ []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.rows, tenant+"/"+id)
	delete(m.leased, tenant+"/"+id)
	return nil
}

// TestHeldExchangeStoredOnce: a held exchange keeps the exchange id its
// hold minted, and the request's id: captured twice (claimed again after
// a lease, or a copy held in the process too) it is stored once; the
// claim leaves it held until Settle.
func TestHeldExchangeStoredOnce(t *testing.T) {
	held := newMemHeld()
	s := newFakeSaver()
	c := mustCapturer(t, nil, s, nil, Options{Held: held})
	ctx := context.Background()
	ex := exchange(t, "req-1", "where is Porto?", "")
	if _, err := c.Hold(ctx, ex, "resp_1"); err != nil {
		t.Fatalf("Hold: %v", err)
	}
	owner := memory.UserTombstone("t1", "u1")
	claimed, err := c.Claim(ctx, "t1", "resp_1", owner)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if !memory.IsExchangeID(claimed.ID) || claimed.RequestID != "req-1" {
		t.Fatalf("held exchange id %q, request id %q; want a minted id and req-1", claimed.ID, claimed.RequestID)
	}
	if _, err := c.Claim(ctx, "t1", "resp_1", owner); err == nil {
		t.Errorf("claimed again under the first claim's lease")
	}
	if _, err := held.HeldOwner(ctx, "t1", "resp_1", time.Now()); err != nil {
		t.Errorf("claimed exchange not held until settled: %v", err)
	}
	claimed.Reply = exchange(t, "", "", "In Portugal.").Reply
	for range 2 {
		if !c.Capture(ctx, claimed) {
			t.Fatal("capture not settled")
		}
	}
	if ids := s.ids(); len(ids) != 1 || ids[0] != claimed.ID {
		t.Errorf("stored %v, want %s once", ids, claimed.ID)
	}
	if err := c.Settle(ctx, "t1", "resp_1", owner); err != nil {
		t.Fatalf("Settle: %v", err)
	}
	if _, err := held.HeldOwner(ctx, "t1", "resp_1", time.Now()); err == nil {
		t.Errorf("settled exchange still held")
	}
	// A request's exchange, its request id in ID, gets a new id each time.
	plain := exchange(t, "req-2", "hi", "hello")
	for range 2 {
		c.Capture(ctx, plain)
	}
	if n := len(s.ids()); n != 3 {
		t.Errorf("stored %d exchanges, want 3 (a request's exchange is minted an id per capture)", n)
	}
}

// TestHeldExchangeTooLarge: an exchange whose encoding is larger than
// memory.HeldExchangeMaxBytes is not handed to the store
// (memory.ErrHeldTooLarge); one well under it is, dated by the hold.
func TestHeldExchangeTooLarge(t *testing.T) {
	held := newMemHeld()
	c := mustCapturer(t, nil, newFakeSaver(), nil, Options{Held: held})
	ctx := context.Background()
	big := exchange(t, "req-1", strings.Repeat("x", memory.HeldExchangeMaxBytes), "")
	if _, err := c.Hold(ctx, big, "resp_big"); !errors.Is(err, memory.ErrHeldTooLarge) {
		t.Fatalf("Hold of an exchange past the cap = %v, want memory.ErrHeldTooLarge", err)
	}
	before := time.Now()
	if _, err := c.Hold(ctx, exchange(t, "req-2", "where is Porto?", ""), "resp_small"); err != nil {
		t.Fatalf("Hold: %v", err)
	}
	held.mu.Lock()
	defer held.mu.Unlock()
	if _, ok := held.rows["t1/resp_big"]; ok || len(held.rows) != 1 {
		t.Errorf("held %d rows, the one past the cap among them %v", len(held.rows), ok)
	}
	if h := held.rows["t1/resp_small"]; h.Now.Before(before) || !h.Expires.Equal(h.Now.Add(memory.HeldTTL)) {
		t.Errorf("held at %v, expiring %v; want now, and memory.HeldTTL after", h.Now, h.Expires)
	}
}
