package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// HeldStore is a store that holds the exchanges of background responses
// until their answer (memory.HeldResponse), and erases a user's, and a
// conversation's, with them.
type HeldStore interface {
	// HoldResponse keeps h until SettleResponse deletes it; it refuses, with
	// memory.ErrErased, an exchange whose user was erased at or after
	// h.At, with memory.ErrHeldDeleted one whose conversation was
	// deleted at or after h.Received, and with memory.ErrHeldTooLarge one
	// larger than memory.HeldExchangeMaxBytes. It gives up the held
	// exchanges lapsed by h.Now and the tenant's oldest past
	// memory.HeldMax rows or memory.HeldMaxBytes bytes, none under a
	// claim's lease at h.Now, and returns how many it gave up.
	HoldResponse(ctx context.Context, h memory.HeldResponse) (int, error)
	// HeldOwner returns the owner (memory.UserTombstone) of tenant's held
	// response id not lapsed by now, or memory.ErrNotFound.
	HeldOwner(ctx context.Context, tenant, id string, now time.Time) ([]byte, error)
	// ClaimResponse takes tenant's held response id of owner under a
	// lease until until (a lapsed one too, Expires telling), or
	// memory.ErrNotFound: none held, or under another claim's lease at
	// now.
	ClaimResponse(ctx context.Context, tenant, id string, owner []byte, now, until time.Time) (memory.HeldResponse, error)
	// SettleResponse deletes tenant's held response id of owner.
	SettleResponse(ctx context.Context, tenant, id string, owner []byte) error
	DeleteUser(ctx context.Context, tenant, user string) error
	DeleteConversation(ctx context.Context, id memory.Identity) error
}

// RunHeld runs the held response suite. open must return a fresh store
// and register its cleanup.
func RunHeld(t *testing.T, open func(t *testing.T) HeldStore) {
	t.Helper()
	for _, tt := range []struct {
		name string
		run  func(t *testing.T, s HeldStore)
	}{
		{"ClaimedOnce", testHeldClaimedOnce},
		{"ClaimedOnceAtOnce", testHeldClaimedOnceAtOnce},
		{"LeasedUntilSettled", testHeldLeased},
		{"OwnerAndTenantOnly", testHeldOwnerOnly},
		{"Lapses", testHeldLapses},
		{"OldestGivenUpPastTheRows", testHeldRows},
		{"OldestGivenUpPastTheBytes", testHeldBytes},
		{"TooLargeRefused", testHeldTooLarge},
		{"LeasedNotGivenUpPastTheBytes", testHeldLeasedKept},
		{"LeasedNotGivenUpLapsed", testHeldLeasedLapsing},
		{"ErasureRemoves", testHeldErasure},
		{"ErasedUserRefused", testHeldErasedRefused},
		{"ConversationDeletionRemoves", testHeldConversationDeleted},
		{"DeletedConversationRefused", testHeldDeletedRefused},
	} {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, open(t)) })
	}
}

// held is a held response of id for tenant's user in conversation c,
// arrived at at.
func held(tenant, user, c, id string, at time.Time, payload string) memory.HeldResponse {
	return memory.HeldResponse{Identity: memory.Identity{Tenant: tenant, User: user, Conversation: c}, ID: id,
		Exchange: []byte(payload), At: at, Expires: at.Add(memory.HeldTTL), Now: at}
}

// mustHold holds h, and returns how many the store gave up.
func mustHold(t *testing.T, s HeldStore, h memory.HeldResponse) int {
	t.Helper()
	n, err := s.HoldResponse(testCtx(t), h)
	if err != nil {
		t.Fatalf("HoldResponse(%s/%s %s): %v", h.Tenant, h.User, h.ID, err)
	}
	return n
}

// wantHeld checks that tenant's id is held for user, with payload, or
// not held for them (payload ""), by HeldOwner at now and by a claim.
func wantHeld(t *testing.T, s HeldStore, tenant, user, id string, now time.Time, payload string) {
	t.Helper()
	owner, err := s.HeldOwner(testCtx(t), tenant, id, now)
	switch {
	case payload == "" && !errors.Is(err, memory.ErrNotFound) && (err != nil || bytes.Equal(owner, memory.UserTombstone(tenant, user))):
		t.Errorf("HeldOwner(%s, %s) = %x, %v; want memory.ErrNotFound or another user's", tenant, id, owner, err)
	case payload != "" && (err != nil || !bytes.Equal(owner, memory.UserTombstone(tenant, user))):
		t.Errorf("HeldOwner(%s, %s) = %x, %v; want %s's", tenant, id, owner, err, user)
	}
	h, err := claimHeld(t, s, tenant, user, id, now)
	if err == nil {
		settleHeld(t, s, tenant, user, id)
	}
	switch {
	case payload == "" && !errors.Is(err, memory.ErrNotFound):
		t.Errorf("ClaimResponse(%s/%s, %s) = %s, %v; want memory.ErrNotFound", tenant, user, id, quoted(h.Exchange), err)
	case payload != "" && (err != nil || string(h.Exchange) != payload):
		t.Errorf("ClaimResponse(%s/%s, %s) = %s, %v; want %s", tenant, user, id, quoted(h.Exchange), err, quoted([]byte(payload)))
	}
}

// quoted quotes b, or its head and length when it is long.
func quoted(b []byte) string {
	if len(b) <= 40 {
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("%q… (%d bytes)", b[:40], len(b))
}

// claimHeld claims tenant's id for user at now under a lease of
// memory.HeldLease.
func claimHeld(t *testing.T, s HeldStore, tenant, user, id string, now time.Time) (memory.HeldResponse, error) {
	t.Helper()
	return s.ClaimResponse(testCtx(t), tenant, id, memory.UserTombstone(tenant, user), now, now.Add(memory.HeldLease))
}

// settleHeld deletes tenant's id held for user.
func settleHeld(t *testing.T, s HeldStore, tenant, user, id string) {
	t.Helper()
	if err := s.SettleResponse(testCtx(t), tenant, id, memory.UserTombstone(tenant, user)); err != nil {
		t.Fatalf("SettleResponse(%s/%s, %s): %v", tenant, user, id, err)
	}
}

// testHeldLeased: a claim leases a held response: no other claim takes
// it until the lease lapses, it stays held (its claimer may crash before
// its turn is stored), and a claim after the lease takes it again; once
// settled it is gone, and settling it again is no error.
func testHeldLeased(t *testing.T, s HeldStore) {
	now := time.Now()
	mustHold(t, s, held("acme", "ana", "c1", "resp_1", now, "x"))
	if h, err := claimHeld(t, s, "acme", "ana", "resp_1", now); err != nil || string(h.Exchange) != "x" {
		t.Fatalf("first claim = %q, %v; want x", h.Exchange, err)
	}
	within := now.Add(memory.HeldLease - time.Millisecond)
	if h, err := claimHeld(t, s, "acme", "ana", "resp_1", within); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("claim under another's lease = %q, %v; want memory.ErrNotFound", h.Exchange, err)
	}
	if owner, err := s.HeldOwner(testCtx(t), "acme", "resp_1", within); err != nil || !bytes.Equal(owner, memory.UserTombstone("acme", "ana")) {
		t.Errorf("HeldOwner under a lease = %x, %v; want ana's (still held)", owner, err)
	}
	after := now.Add(memory.HeldLease)
	if h, err := claimHeld(t, s, "acme", "ana", "resp_1", after); err != nil || string(h.Exchange) != "x" {
		t.Fatalf("claim after the lease lapsed = %q, %v; want x", h.Exchange, err)
	}
	if h, err := claimHeld(t, s, "acme", "ana", "resp_1", after); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("claim under the second claim's lease = %q, %v; want memory.ErrNotFound", h.Exchange, err)
	}
	settleHeld(t, s, "acme", "ana", "resp_1")
	settleHeld(t, s, "acme", "ana", "resp_1")
	later := after.Add(memory.HeldLease)
	if _, err := s.HeldOwner(testCtx(t), "acme", "resp_1", later); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("HeldOwner once settled = %v, want memory.ErrNotFound", err)
	}
	if h, err := claimHeld(t, s, "acme", "ana", "resp_1", later); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("claim once settled = %q, %v; want memory.ErrNotFound", h.Exchange, err)
	}
	// A hold of the same id again is claimable at once.
	mustHold(t, s, held("acme", "ana", "c1", "resp_1", now, "y"))
	wantHeld(t, s, "acme", "ana", "resp_1", now, "y")
}

// testHeldClaimedOnce: a held response is its owner's to claim, once
// settled; a
// second hold of the same id replaces the first.
func testHeldClaimedOnce(t *testing.T, s HeldStore) {
	now := time.Now()
	mustHold(t, s, held("acme", "ana", "c1", "resp_1", now, "first"))
	mustHold(t, s, held("acme", "ana", "c1", "resp_1", now, "second"))
	wantHeld(t, s, "acme", "ana", "resp_1", now, "second")
	wantHeld(t, s, "acme", "ana", "resp_1", now, "")
}

// testHeldClaimedOnceAtOnce: of many claims of one held response made at
// once (GETs on several gateways), exactly one gets it (leases it).
func testHeldClaimedOnceAtOnce(t *testing.T, s HeldStore) {
	now := time.Now()
	const claims = 8
	for round := range 5 {
		id := fmt.Sprintf("resp_%d", round)
		mustHold(t, s, held("acme", "ana", "c1", id, now, "x"))
		var (
			wg  sync.WaitGroup
			mu  sync.Mutex
			got int
		)
		for range claims {
			wg.Go(func() {
				_, err := claimHeld(t, s, "acme", "ana", id, now)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					got++
				case !errors.Is(err, memory.ErrNotFound):
					t.Errorf("ClaimResponse at once with others: %v", err)
				}
			})
		}
		wg.Wait()
		if got != 1 {
			t.Fatalf("%d claims at once took the held response %d times, want once", claims, got)
		}
	}
}

// testHeldOwnerOnly: another user of the tenant, or the same user id of
// another tenant, claims nothing; the tenant's id of another tenant is
// not found.
func testHeldOwnerOnly(t *testing.T, s HeldStore) {
	now := time.Now()
	mustHold(t, s, held("acme", "ana", "c1", "resp_1", now, "ana's"))
	if _, err := s.HeldOwner(testCtx(t), "other", "resp_1", now); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("another tenant's HeldOwner = %v, want memory.ErrNotFound", err)
	}
	wantHeld(t, s, "acme", "bob", "resp_1", now, "")
	wantHeld(t, s, "other", "ana", "resp_1", now, "")
	wantHeld(t, s, "acme", "ana", "resp_1", now, "ana's")
}

// testHeldLapses: from its expiry on a held response is not found, and a
// claim takes it with the expiry that tells it lapsed; a hold after that
// removes the lapsed rows.
func testHeldLapses(t *testing.T, s HeldStore) {
	now := time.Now()
	mustHold(t, s, held("acme", "ana", "c1", "resp_1", now, "x"))
	mustHold(t, s, held("acme", "ana", "c1", "resp_2", now, "y"))
	if _, err := s.HeldOwner(testCtx(t), "acme", "resp_1", now.Add(memory.HeldTTL)); !errors.Is(err, memory.ErrNotFound) {
		t.Errorf("HeldOwner at its expiry = %v, want memory.ErrNotFound", err)
	}
	h, err := claimHeld(t, s, "acme", "ana", "resp_1", now)
	if err != nil || h.Expires.After(now.Add(memory.HeldTTL)) || h.Expires.Before(now.Add(memory.HeldTTL-time.Second)) {
		t.Errorf("claim of a lapsed one = %v (expires %v), want it, expiring %v", err, h.Expires, now.Add(memory.HeldTTL))
	}
	settleHeld(t, s, "acme", "ana", "resp_1")
	later := now.Add(memory.HeldTTL + time.Minute)
	if n := mustHold(t, s, held("acme", "bob", "c2", "resp_3", later, "z")); n != 1 {
		t.Errorf("a hold after one lapsed gave up %d, want 1 (the lapsed one)", n)
	}
	wantHeld(t, s, "acme", "ana", "resp_2", now, "")
	wantHeld(t, s, "acme", "bob", "resp_3", later, "z")
}

// testHeldRows: past memory.HeldMax of a tenant the oldest is given up;
// another tenant's stay.
func testHeldRows(t *testing.T, s HeldStore) {
	now := time.Now()
	mustHold(t, s, held("other", "ana", "c1", "resp_other", now, "theirs"))
	for i := range memory.HeldMax {
		if n := mustHold(t, s, held("acme", "ana", "c1", fmt.Sprintf("resp_%d", i), now.Add(time.Duration(i)*time.Millisecond), "x")); n != 0 {
			t.Fatalf("hold %d of %d gave up %d", i+1, memory.HeldMax, n)
		}
	}
	if n := mustHold(t, s, held("acme", "ana", "c1", "resp_last", now.Add(time.Second+memory.HeldMax*time.Millisecond), "last")); n != 1 {
		t.Errorf("a hold past the rows gave up %d, want 1", n)
	}
	wantHeld(t, s, "acme", "ana", "resp_0", now, "")
	wantHeld(t, s, "acme", "ana", "resp_1", now, "x")
	wantHeld(t, s, "acme", "ana", "resp_last", now, "last")
	wantHeld(t, s, "other", "ana", "resp_other", now, "theirs")
}

// testHeldBytes: past memory.HeldMaxBytes of a tenant the oldest are
// given up.
func testHeldBytes(t *testing.T, s HeldStore) {
	now := time.Now()
	big := string(bytes.Repeat([]byte("b"), memory.HeldExchangeMaxBytes))
	const fit = memory.HeldMaxBytes / memory.HeldExchangeMaxBytes
	for i := range fit {
		if n := mustHold(t, s, held("acme", "ana", "c1", fmt.Sprintf("resp_%d", i), now.Add(time.Duration(i)*time.Millisecond), big)); n != 0 {
			t.Fatalf("hold %d of %d gave up %d", i+1, fit, n)
		}
	}
	if n := mustHold(t, s, held("acme", "ana", "c1", "resp_last", now.Add(time.Second), big)); n != 1 {
		t.Errorf("a hold past the bytes gave up %d, want 1", n)
	}
	wantHeld(t, s, "acme", "ana", "resp_0", now, "")
	wantHeld(t, s, "acme", "ana", "resp_1", now, big)
	wantHeld(t, s, "acme", "ana", "resp_last", now, big)
}

// testHeldTooLarge: an exchange larger than memory.HeldExchangeMaxBytes
// is refused (memory.ErrHeldTooLarge), and gives up none of the tenant's
// others; one of that size is held.
func testHeldTooLarge(t *testing.T, s HeldStore) {
	now := time.Now()
	mustHold(t, s, held("acme", "ana", "c1", "resp_1", now, "x"))
	huge := held("acme", "ana", "c1", "resp_huge", now.Add(time.Millisecond), string(bytes.Repeat([]byte("h"), memory.HeldExchangeMaxBytes+1)))
	if n, err := s.HoldResponse(testCtx(t), huge); !errors.Is(err, memory.ErrHeldTooLarge) || n != 0 {
		t.Errorf("HoldResponse of %d bytes = %d, %v; want 0, memory.ErrHeldTooLarge", len(huge.Exchange), n, err)
	}
	wantHeld(t, s, "acme", "ana", "resp_huge", now, "")
	wantHeld(t, s, "acme", "ana", "resp_1", now, "x")
	most := string(bytes.Repeat([]byte("m"), memory.HeldExchangeMaxBytes))
	mustHold(t, s, held("acme", "ana", "c1", "resp_most", now, most))
	wantHeld(t, s, "acme", "ana", "resp_most", now, most)
}

// testHeldLeasedKept: a held exchange under a claim's lease (its capture
// in progress) is not given up past the tenant's bounds, which count it
// and give up the oldest not leased instead; once the lease lapsed it is
// claimed again.
func testHeldLeasedKept(t *testing.T, s HeldStore) {
	now := time.Now()
	big := string(bytes.Repeat([]byte("b"), memory.HeldExchangeMaxBytes))
	mustHold(t, s, held("acme", "ana", "c1", "resp_leased", now, big))
	if _, err := claimHeld(t, s, "acme", "ana", "resp_leased", now); err != nil {
		t.Fatalf("claim: %v", err)
	}
	const fit = memory.HeldMaxBytes / memory.HeldExchangeMaxBytes
	given := 0
	for i := range fit {
		given += mustHold(t, s, held("acme", "ana", "c1", fmt.Sprintf("resp_%d", i), now.Add(time.Duration(i+1)*time.Millisecond), big))
	}
	if given != 1 {
		t.Errorf("holds past the bytes with the oldest leased gave up %d, want 1", given)
	}
	wantHeld(t, s, "acme", "ana", "resp_0", now, "")
	wantHeld(t, s, "acme", "ana", "resp_1", now, big)
	after := now.Add(memory.HeldLease)
	if h, err := claimHeld(t, s, "acme", "ana", "resp_leased", after); err != nil || string(h.Exchange) != big {
		t.Fatalf("claim of the leased one after its lease = %d bytes, %v; want it kept past the bounds", len(h.Exchange), err)
	}
	settleHeld(t, s, "acme", "ana", "resp_leased")
}

// testHeldLeasedLapsing: a held exchange claimed before it lapsed is not
// given up as lapsed under the claim's lease; once the lease lapsed it is
// claimed again (its expiry telling), or given up.
func testHeldLeasedLapsing(t *testing.T, s HeldStore) {
	now := time.Now()
	mustHold(t, s, held("other", "ana", "c1", "resp_lapsing", now, "x"))
	claimedAt := now.Add(memory.HeldTTL - time.Second)
	if _, err := claimHeld(t, s, "other", "ana", "resp_lapsing", claimedAt); err != nil {
		t.Fatalf("claim before it lapsed: %v", err)
	}
	lapsed := now.Add(memory.HeldTTL + time.Second)
	if n := mustHold(t, s, held("other", "bob", "c2", "resp_b", lapsed, "y")); n != 0 {
		t.Errorf("a hold once it lapsed, under a lease, gave up %d, want 0", n)
	}
	if h, err := claimHeld(t, s, "other", "ana", "resp_lapsing", claimedAt.Add(memory.HeldLease)); err != nil || string(h.Exchange) != "x" {
		t.Errorf("claim after the lease = %q, %v; want it (lapsed)", h.Exchange, err)
	}
	if n := mustHold(t, s, held("other", "bob", "c2", "resp_c", claimedAt.Add(3*memory.HeldLease), "z")); n != 1 {
		t.Errorf("a hold once its lease lapsed too gave up %d, want 1", n)
	}
}

// testHeldErasure: erasing a user removes the user's held responses, and
// only theirs.
func testHeldErasure(t *testing.T, s HeldStore) {
	now := time.Now()
	mustHold(t, s, held("acme", "ana", "c1", "resp_1", now, "ana's"))
	mustHold(t, s, held("acme", "bob", "c1", "resp_2", now, "bob's"))
	if err := s.DeleteUser(testCtx(t), "acme", "ana"); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	wantHeld(t, s, "acme", "ana", "resp_1", now, "")
	wantHeld(t, s, "acme", "bob", "resp_2", now, "bob's")
}

// testHeldErasedRefused: an exchange from a request that arrived before
// its user's erasure is not held (memory.ErrErased); one from after it
// is.
func testHeldErasedRefused(t *testing.T, s HeldStore) {
	before := time.Now()
	if err := s.DeleteUser(testCtx(t), "acme", "ana"); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	if _, err := s.HoldResponse(testCtx(t), held("acme", "ana", "c1", "resp_1", before, "x")); !errors.Is(err, memory.ErrErased) {
		t.Fatalf("HoldResponse from before the erasure = %v, want memory.ErrErased", err)
	}
	wantHeld(t, s, "acme", "ana", "resp_1", before, "")
	after := time.Now().Add(time.Millisecond)
	mustHold(t, s, held("acme", "ana", "c1", "resp_2", after, "y"))
	wantHeld(t, s, "acme", "ana", "resp_2", after, "y")
}

// testHeldConversationDeleted: deleting a conversation (stored or not)
// removes its held responses, and only its.
func testHeldConversationDeleted(t *testing.T, s HeldStore) {
	now := time.Now()
	mustHold(t, s, held("acme", "ana", "c1", "resp_1", now, "c1's"))
	mustHold(t, s, held("acme", "ana", "c2", "resp_2", now, "c2's"))
	mustHold(t, s, held("acme", "bob", "c1", "resp_3", now, "bob's"))
	if err := s.DeleteConversation(testCtx(t), memory.Identity{Tenant: "acme", User: "ana", Conversation: "c1"}); err != nil && !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("DeleteConversation: %v", err)
	}
	wantHeld(t, s, "acme", "ana", "resp_1", now, "")
	wantHeld(t, s, "acme", "ana", "resp_2", now, "c2's")
	wantHeld(t, s, "acme", "bob", "resp_3", now, "bob's")
}

// testHeldDeletedRefused: an exchange from a request received before its
// conversation's deletion is not held (memory.ErrHeldDeleted), as its
// save would be dropped; one received after it is, and another
// conversation's is.
func testHeldDeletedRefused(t *testing.T, s HeldStore) {
	before := time.Now()
	c1 := memory.Identity{Tenant: "acme", User: "ana", Conversation: "c1"}
	if err := s.DeleteConversation(testCtx(t), c1); err != nil && !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("DeleteConversation: %v", err)
	}
	h := held("acme", "ana", "c1", "resp_1", before, "x")
	h.Received = before
	if _, err := s.HoldResponse(testCtx(t), h); !errors.Is(err, memory.ErrHeldDeleted) {
		t.Fatalf("HoldResponse received before the deletion = %v, want memory.ErrHeldDeleted", err)
	}
	wantHeld(t, s, "acme", "ana", "resp_1", before, "")
	other := held("acme", "ana", "c2", "resp_2", before, "y")
	other.Received = before
	mustHold(t, s, other)
	wantHeld(t, s, "acme", "ana", "resp_2", before, "y")
	after := time.Now().Add(time.Millisecond)
	late := held("acme", "ana", "c1", "resp_3", after, "z")
	late.Received = after
	mustHold(t, s, late)
	wantHeld(t, s, "acme", "ana", "resp_3", after, "z")
}
