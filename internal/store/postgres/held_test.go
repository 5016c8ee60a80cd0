package postgres

import (
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/storetest"
)

var _ storetest.HeldStore = (*Store)(nil)

func TestHeldContract(t *testing.T) {
	storetest.RunHeld(t, func(t *testing.T) storetest.HeldStore { return mustOpen(t) })
}

// TestHeldClaimDuringEvictionKept: a claim that commits while the bounds
// eviction waits for its row lock keeps the row, the eviction's recheck
// seeing the new lease (READ COMMITTED re-evaluates only the outer
// DELETE's own conditions on the row's new version).
func TestHeldClaimDuringEvictionKept(t *testing.T) {
	s, ctx := mustOpen(t), testCtx(t)
	at := time.Now().UTC().Truncate(time.Second)
	hold := func(id string, created time.Time) memory.HeldResponse {
		return memory.HeldResponse{Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c"}, ID: id,
			Exchange: []byte("x"), At: created, Expires: at.Add(memory.HeldTTL), Now: created}
	}
	if _, err := s.HoldResponse(ctx, hold("oldest", at)); err != nil {
		t.Fatalf("HoldResponse(oldest): %v", err)
	}
	// Fill the tenant to memory.HeldMax with newer rows.
	if _, err := s.pool.Exec(ctx, `INSERT INTO held_responses
		(digest, tenant_digest, owner, conversation, exchange, size, created_at, expires_at)
		SELECT decode(md5(g::text), 'hex'), $1, $2, $3, 'x', 1, $4::timestamptz + g * interval '1 millisecond', $5
		FROM generate_series(1, $6::integer) AS g`,
		memory.HeldDigest("t", ""), memory.UserTombstone("t", "u"), []byte("c"), at, at.Add(memory.HeldTTL),
		memory.HeldMax-1); err != nil {
		t.Fatalf("fill: %v", err)
	}
	// The claim, as ClaimResponse makes it, left uncommitted.
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit, a no-op
	tag, err := tx.Exec(ctx, `UPDATE held_responses SET claimed_until = $1 WHERE digest = $2`,
		at.Add(memory.HeldLease), memory.HeldDigest("t", "oldest"))
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("claim: %v, %d rows", err, tag.RowsAffected())
	}
	// One more hold puts the tenant past memory.HeldMax: its eviction's
	// snapshot sees the oldest row unleased and waits for the claim's lock.
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := s.HoldResponse(ctx, hold("newest", at.Add(time.Second)))
		done <- result{n, err}
	}()
	for {
		var waiting int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%ROW_NUMBER() OVER newest%'`,
		).Scan(&waiting); err != nil {
			t.Fatalf("pg_stat_activity: %v", err)
		}
		if waiting > 0 {
			break
		}
		select {
		case r := <-done:
			t.Fatalf("HoldResponse returned before waiting for the claim's lock: %d, %v", r.n, r.err)
		case <-ctx.Done():
			t.Fatal("the eviction never waited for the claim's lock")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("HoldResponse(newest): %v", r.err)
	}
	var kept int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM held_responses WHERE digest = $1 AND claimed_until IS NOT NULL`,
		memory.HeldDigest("t", "oldest")).Scan(&kept); err != nil {
		t.Fatalf("count: %v", err)
	}
	if kept != 1 {
		t.Errorf("the claimed row was given up by an eviction that read it unleased (HoldResponse gave up %d)", r.n)
	}
}
