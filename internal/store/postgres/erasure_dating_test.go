package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestErasureDatedOnceLocked: an erasure that waits for the user's lock (a
// save of the user holds it) is dated when it takes the lock, not when it
// began waiting. An exchange said while it waited — whose request read
// what the erasure then removes — and saved after it is dropped, and
// ErasedAt is not before the lock was released.
func TestErasureDatedOnceLocked(t *testing.T) {
	ctx := testCtx(t)
	s := mustOpen(t)
	hold, holdPID := holdInTx(t, s, fmt.Sprintf(userLockSQL, "_shared"), "acme", "alice")
	done := make(chan error, 1)
	go func() { done <- s.DeleteUser(ctx, "acme", "alice") }()
	waitForLockWaiters(t, s, holdPID, 1)
	said := time.Now() // while the erasure waits
	if err := hold.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	if at, err := s.ErasedAt(ctx, "acme", "alice"); err != nil || at.Before(said) {
		t.Errorf("ErasedAt = %v, %v; want not before %v, when the erasure still waited for the lock", at, err, said)
	}
	ex := memory.Exchange{ID: "ex1", Identity: memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}, At: said,
		Turn: []memory.Message{{Role: "user", Content: "I live in Porto"}}, Reply: memory.Message{Role: "assistant", Content: "Noted"}}
	if res, err := s.SaveExchange(ctx, ex); err != nil || !res.Dropped {
		t.Fatalf("exchange said while the erasure waited, saved after it = %+v, %v; want Dropped", res, err)
	}
}
