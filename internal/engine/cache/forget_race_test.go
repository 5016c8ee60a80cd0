package cache_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
)

// slowReads is a store whose reads answer what they read only once gate
// closes, each telling arrived first.
type slowReads struct {
	*sqlite.Store
	gate    chan struct{}
	arrived chan string
}

func (s slowReads) hold(what string) {
	s.arrived <- what
	<-s.gate
}

func (s slowReads) Recent(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error) {
	msgs, err := s.Store.Recent(ctx, id, n)
	s.hold("recent")
	return msgs, err
}

func (s slowReads) Facts(ctx context.Context, tenant, user string, now time.Time, history bool) ([]memory.Fact, error) {
	facts, err := s.Store.Facts(ctx, tenant, user, now, history)
	s.hold("facts")
	return facts, err
}

func (s slowReads) LatestSummary(ctx context.Context, id memory.Identity) (memory.Summary, error) {
	sum, err := s.Store.LatestSummary(ctx, id)
	s.hold("summary")
	return sum, err
}

func (s slowReads) MessagesAfter(ctx context.Context, id memory.Identity, afterSeq int64, limit int) ([]memory.Message, error) {
	msgs, err := s.Store.MessagesAfter(ctx, id, afterSeq, limit)
	s.hold("head")
	return msgs, err
}

// TestReadsKeepNothingOfAUserErasedDuringTheirReads: reads of a user that
// were under way when the user was erased (read before the erasure,
// answered after it) put nothing in the caches: their entries, under
// revisions no request asks for again, would hold the erased text until
// evicted, where no Forget looks.
func TestReadsKeepNothingOfAUserErasedDuringTheirReads(t *testing.T) {
	ctx := context.Background()
	st := openSQLite(t, "")
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	ex := memory.Exchange{ID: "ex1", Identity: id, At: time.Now(),
		Turn:  []memory.Message{{Role: "user", Content: "my new address is 12 Rua Augusta"}},
		Reply: memory.Message{Role: "assistant", Content: "Noted."}}
	if _, err := st.SaveExchange(ctx, ex); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpsertFact(ctx, memory.Fact{Tenant: id.Tenant, User: id.User, Type: memory.FactProfile, Key: "city", Value: "Lisbon", Confidence: 1, UpdatedAt: time.Now()}, 200); err != nil {
		t.Fatal(err)
	}
	rev, err := st.ItemRevisions(ctx, id.Tenant, id.User)
	if err != nil {
		t.Fatal(err)
	}
	src := slowReads{Store: st, gate: make(chan struct{}), arrived: make(chan string, 4)}
	r := cache.NewReads(src, nil, cache.DefaultTailBytes, cache.DefaultKnowledgeBytes)
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = r.Recent(ctx, &rev, id, 20) })
	wg.Go(func() { _, _ = r.Facts(ctx, &rev, id.Tenant, id.User, time.Now(), false) })
	wg.Go(func() { _, _ = r.LatestSummary(ctx, &rev, id) })
	wg.Go(func() { _, _ = r.Head(ctx, &rev, id, 4) })
	for range 4 {
		<-src.arrived
	}
	if err := r.DeleteUser(ctx, id.Tenant, id.User); err != nil {
		t.Fatal(err)
	}
	close(src.gate)
	wg.Wait()
	if n := cache.HeldOf(r, id.Tenant, id.User); n != 0 {
		t.Fatalf("%d entries held of a user erased while they were read, want none", n)
	}
	// Reads begun after the erasure are kept as usual.
	rev, err = st.ItemRevisions(ctx, id.Tenant, id.User)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Recent(ctx, &rev, id, 20); err != nil {
		t.Fatal(err)
	}
	if n := cache.HeldOf(r, id.Tenant, id.User); n != 1 {
		t.Fatalf("%d entries held after a read begun after the erasure, want 1", n)
	}
}

// slowSave is a store whose saves answer only once gate closes, each
// telling arrived first: a save committed before an erasure, answered
// after it.
type slowSave struct {
	*sqlite.Store
	gate    chan struct{}
	arrived chan struct{}
}

func (s slowSave) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	res, err := s.Store.SaveExchange(ctx, ex)
	s.arrived <- struct{}{}
	<-s.gate
	return res, err
}

// TestSavesKeepNothingOfAUserErasedAfterTheirCommit: a save that committed
// before its user's erasure and returned after it appends nothing of what
// it stored to a tail held (here one read after the erasure under the
// count read before it): the tail it would make, under a count no request
// reads again, would hold the erased turn until evicted.
func TestSavesKeepNothingOfAUserErasedAfterTheirCommit(t *testing.T) {
	ctx := context.Background()
	st := openSQLite(t, "")
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	turn := func(n string) memory.Exchange {
		return memory.Exchange{ID: "ex" + n, Identity: id, At: time.Now(),
			Turn:  []memory.Message{{Role: "user", Content: "my new address is " + n + " Rua Augusta"}},
			Reply: memory.Message{Role: "assistant", Content: "Noted."}}
	}
	if _, err := st.SaveExchange(ctx, turn("1")); err != nil {
		t.Fatal(err)
	}
	src := slowSave{Store: st, gate: make(chan struct{}), arrived: make(chan struct{}, 1)}
	r := cache.NewReads(src, nil, cache.DefaultTailBytes, cache.DefaultKnowledgeBytes)
	rev, err := st.ItemRevisions(ctx, id.Tenant, id.User)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Recent(ctx, &rev, id, 20); err != nil { // the tail the save extends
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := r.SaveExchange(ctx, turn("2")); done <- err }()
	<-src.arrived
	if err := r.DeleteUser(ctx, id.Tenant, id.User); err != nil {
		t.Fatal(err)
	}
	// A request that read the user's counts before the erasure reads
	// their tail after it: nothing, held under the old count.
	if msgs, err := r.Recent(ctx, &rev, id, 20); err != nil || len(msgs) != 0 {
		t.Fatalf("Recent after the erasure: %d messages, %v", len(msgs), err)
	}
	close(src.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := cache.HeldOf(r, id.Tenant, id.User); n != 1 {
		t.Fatalf("%d entries held of a user erased after their save committed, want 1 (the empty tail read after the erasure)", n)
	}
}

// slowDelete is a store whose DeleteUser erases only once gate closes,
// telling arrived first.
type slowDelete struct {
	*sqlite.Store
	gate    chan struct{}
	arrived chan struct{}
}

func (s slowDelete) DeleteUser(ctx context.Context, tenant, user string) error {
	s.arrived <- struct{}{}
	<-s.gate
	return s.Store.DeleteUser(ctx, tenant, user)
}

// TestReadsDeleteUserCancelsTheCallsBeforeTheStorePass: the calls in
// flight carrying the user's text (Calls, among what an erasure forgets)
// are cancelled while the store's erasure still runs, not once it is over.
func TestReadsDeleteUserCancelsTheCallsBeforeTheStorePass(t *testing.T) {
	src := slowDelete{Store: openSQLite(t, ""), gate: make(chan struct{}), arrived: make(chan struct{}, 1)}
	calls := cache.NewCalls()
	r := cache.NewReads(src, calls, cache.DefaultTailBytes, cache.DefaultKnowledgeBytes)
	cctx, end, err := calls.Begin(context.Background(), cache.Owner{Tenant: "acme", User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer end()
	done := make(chan error, 1)
	go func() { done <- r.DeleteUser(context.Background(), "acme", "alice") }()
	<-src.arrived
	select {
	case <-cctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the user's call still runs while the store erases them")
	}
	close(src.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
