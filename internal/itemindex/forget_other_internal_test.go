package itemindex

import (
	"context"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// growingSource holds one user's items 1..upTo; a Load runs onLoad first
// (a forget arriving while the store is read) and counts the rows read.
type growingSource struct {
	erasedSource
	upTo   int64
	rows   int
	onLoad func()
}

func (s *growingSource) Load(_ context.Context, _ Key, afterID int64, add func(int64, string, string, []byte, []float32) error) error {
	if s.onLoad != nil {
		s.onLoad()
	}
	for id := afterID + 1; id <= s.upTo; id++ {
		s.rows++
		if err := add(id, "c1", "m", nil, []float32{1, 0}); err != nil {
			return err
		}
	}
	return nil
}

// TestOtherUsersForgetKeepsTheSlot: another tenant's forget (an erasure,
// a conversation deletion, even of one that does not exist) while a
// user's slot is extended neither drops the slot nor refuses the
// extension: the user's next search reads no row again. (Before, any
// forget meanwhile removed the slot, and every search after reloaded the
// user's whole index: one tenant's deletions kept the others' empty.)
func TestOtherUsersForgetKeepsTheSlot(t *testing.T) {
	ctx := context.Background()
	open := make(chan struct{})
	close(open)
	src := &growingSource{erasedSource: erasedSource{gate: open}, upTo: 1}
	x := New(src, DefaultLimits)
	q := memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: []float32{1, 0}, Model: "m", Dims: 2, Limit: 5}
	if _, err := x.SearchVector(ctx, memory.Revisions{Added: 1, Messages: 1}, q); err != nil {
		t.Fatal(err)
	}
	src.upTo, src.onLoad = 2, func() { x.Forget("other", "bob") }
	rev := memory.Revisions{Added: 2, Messages: 2}
	if _, err := x.SearchVector(ctx, rev, q); err != nil {
		t.Fatal(err)
	}
	src.onLoad = nil
	if src.rows != 2 {
		t.Fatalf("the extension read %d rows, want 2 (1 loaded, 1 added)", src.rows)
	}
	if n, _ := x.vectors.Usage(); n == 0 {
		t.Fatal("alice's vector slot dropped for tenant other's user bob's forget")
	}
	if _, err := x.SearchVector(ctx, rev, q); err != nil {
		t.Fatal(err)
	}
	if src.rows != 2 {
		t.Fatalf("alice's next search at the same revision read %d rows again", src.rows-2)
	}
}
