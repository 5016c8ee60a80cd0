package proxy

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// memResenders is a ResenderStore in memory; err, when set, fails every
// call; added, when set, is called inside each AddResender.
type memResenders struct {
	mu    sync.Mutex
	users map[[32]byte]bool
	adds  int
	err   error
	added func()
}

func (m *memResenders) Resends(_ context.Context, user [32]byte) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.users[user], m.err
}

func (m *memResenders) AddResender(_ context.Context, user [32]byte, _ time.Duration) error {
	if m.added != nil {
		m.added()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	if m.users == nil {
		m.users = map[[32]byte]bool{}
	}
	m.users[user] = true
	m.adds++
	return nil
}

func (m *memResenders) ForgetResender(_ context.Context, user [32]byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.users, user)
	return m.err
}

var _ ResenderStore = (*memResenders)(nil)

// TestResendersShareTheSignal: two processes' resenders over one shared
// store. The user seen resending by the first is written there once (not
// on each sighting, until the write is resenderRefresh old); the
// second, which cannot tell on its own, asks and is told, and keeps the
// answer; another user is not. Forgetting on either drops both tiers.
func TestResendersShareTheSignal(t *testing.T) {
	shared := &memResenders{}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	failed := func(err error) { t.Errorf("write failed: %v", err) }
	p1, p2 := newResenders(shared, time.Second, clock, failed), newResenders(shared, time.Second, clock, failed)

	if p2.resends("t", "ana") {
		t.Fatal("p2 holds ana before anyone saw her")
	}
	if ok, err := p2.ask("t", "ana")(context.Background()); ok || err != nil {
		t.Fatalf("asked before anyone saw her: %v, %v", ok, err)
	}
	for range 3 {
		p1.seen("t", "ana")
		p1.wait()
	}
	if shared.adds != 1 {
		t.Errorf("%d writes for three sightings, want 1", shared.adds)
	}
	now = now.Add(resenderRefresh + time.Minute)
	p1.seen("t", "ana")
	p1.wait()
	if shared.adds != 2 {
		t.Errorf("%d writes after the first's refresh interval, want 2", shared.adds)
	}
	if ok, err := p2.ask("t", "ana")(context.Background()); !ok || err != nil {
		t.Fatalf("p2 asked after p1 saw her: %v, %v", ok, err)
	}
	if !p2.resends("t", "ana") {
		t.Error("p2 did not keep what it was told")
	}
	if ok, _ := p2.ask("t", "bob")(context.Background()); ok {
		t.Error("bob, never seen, told a resender")
	}
	if ok, _ := p2.ask("u", "ana")(context.Background()); ok {
		t.Error("ana of another tenant told a resender")
	}

	if err := p2.forget(context.Background(), "t", "ana"); err != nil {
		t.Fatal(err)
	}
	if p2.resends("t", "ana") {
		t.Error("p2 still holds ana after forgetting her")
	}
	if ok, _ := p1.ask("t", "ana")(context.Background()); ok {
		t.Error("the shared signal outlived the forget")
	}
}

// TestResendersForgetBeatsAWriteUnderWay: a forget that comes while the
// first sighting's write is under way leaves nothing shared once the
// write is done, and a read begun before a forget keeps nothing in this
// process's tier.
func TestResendersForgetBeatsAWriteUnderWay(t *testing.T) {
	shared := &memResenders{}
	release, writing := make(chan struct{}), make(chan struct{})
	shared.added = func() {
		close(writing)
		<-release
	}
	r := newResenders(shared, time.Second, time.Now, func(err error) { t.Errorf("write failed: %v", err) })
	r.seen("t", "ana")
	<-writing
	if err := r.forget(context.Background(), "t", "ana"); err != nil {
		t.Fatal(err)
	}
	close(release)
	r.wait()
	if ok, _ := r.shared.Resends(context.Background(), resenderKey("t", "ana")); ok {
		t.Error("a write begun before the forget stayed shared")
	}

	shared.added = nil
	if err := shared.AddResender(context.Background(), resenderKey("t", "bob"), time.Hour); err != nil {
		t.Fatal(err)
	}
	gated := &gatedResenders{memResenders: shared, reading: make(chan struct{}), release: make(chan struct{})}
	r2 := newResenders(gated, time.Second, time.Now, nil)
	done := make(chan bool)
	go func() {
		ok, _ := r2.ask("t", "bob")(context.Background())
		done <- ok
	}()
	<-gated.reading
	if err := r2.forget(context.Background(), "t", "bob"); err != nil {
		t.Fatal(err)
	}
	close(gated.release)
	<-done
	if r2.resends("t", "bob") {
		t.Error("a read begun before the forget put bob back in this process's tier")
	}
}

// TestResendersClearKeepsAWriteUnderWay: a clear (the erasure notices'
// subscription starting, as in a process just begun serving) while the
// first sighting's write is under way drops this process's tier only:
// the write stays shared, and the user's next request, which this
// process's tier cannot tell any more, is told by asking.
func TestResendersClearKeepsAWriteUnderWay(t *testing.T) {
	shared := &memResenders{}
	release, writing := make(chan struct{}), make(chan struct{})
	shared.added = func() {
		close(writing)
		<-release
	}
	r := newResenders(shared, time.Second, time.Now, func(err error) { t.Errorf("write failed: %v", err) })
	r.seen("t", "ana")
	<-writing
	r.clear()
	close(release)
	r.wait()
	if r.resends("t", "ana") {
		t.Error("a clear left ana in this process's tier")
	}
	if ok, err := r.ask("t", "ana")(context.Background()); !ok || err != nil {
		t.Errorf("a write under way at a clear was undone: asked %v, %v", ok, err)
	}
	if !r.resends("t", "ana") {
		t.Error("the answer was not kept in this process's tier")
	}
}

// gatedResenders is memResenders whose reads answer what they read once
// release is closed, having closed reading.
type gatedResenders struct {
	*memResenders
	reading, release chan struct{}
}

func (g *gatedResenders) Resends(ctx context.Context, user [32]byte) (bool, error) {
	ok, err := g.memResenders.Resends(ctx, user)
	close(g.reading)
	<-g.release
	return ok, err
}

// TestResendersWithoutTheSharedSignal: a failed write is told, and the
// next sighting writes again; a failed read is the ask's error; this
// process's tier answers throughout. Without a shared store there is
// nothing to ask.
func TestResendersWithoutTheSharedSignal(t *testing.T) {
	shared := &memResenders{err: errors.New("redis down")}
	var fails int
	r := newResenders(shared, time.Second, time.Now, func(error) { fails++ })
	r.seen("t", "ana")
	r.wait()
	r.seen("t", "ana")
	r.wait()
	if fails != 2 {
		t.Errorf("%d failed writes told, want 2 (the failed one is tried again)", fails)
	}
	if !r.resends("t", "ana") {
		t.Error("this process's tier lost ana")
	}
	if _, err := r.ask("t", "bob")(context.Background()); err == nil {
		t.Error("a failed read answered")
	}
	if err := r.forget(context.Background(), "t", "ana"); err == nil {
		t.Error("a failed deletion of the shared signal not returned")
	}
	if r.resends("t", "ana") {
		t.Error("this process's tier kept ana after the forget")
	}
	if newResenders(nil, time.Second, time.Now, nil).ask("t", "ana") != nil {
		t.Error("a question without a shared signal")
	}
}

// TestForgetCountsEachSharedStoreApart: a failed deletion of the shared
// new-chat signal and one of the shared prints are counted by metrics of
// their own, so an operator tells which store failed.
func TestForgetCountsEachSharedStoreApart(t *testing.T) {
	down := errors.New("redis down")
	signal, prints := &memResenders{}, &memPrints{}
	up := upstreamtest.New(t, upstreamtest.Chat(upstreamtest.Reply{Content: "ok"}))
	g := mustGateway(t, up, func(cfg *gatewayConfig) { cfg.SkipTranscripts = true },
		Deps{Resolver: identity.New(nil), Resenders: signal, Prints: prints})
	const (
		signalForget = `memgate_newchat_signal_failed_total{op="forget"} `
		printsForget = `memgate_auxiliary_prints_failed_total{op="forget"} `
	)
	for _, c := range []struct {
		name                 string
		signalErr, printsErr error
		signal, prints       string
	}{
		{name: "signal fails", signalErr: down, signal: "1", prints: "0"},
		{name: "prints fail", printsErr: down, signal: "1", prints: "1"},
		{name: "both fail", signalErr: down, printsErr: down, signal: "2", prints: "2"},
	} {
		signal.mu.Lock()
		signal.err = c.signalErr
		signal.mu.Unlock()
		prints.mu.Lock()
		prints.err = c.printsErr
		prints.mu.Unlock()
		g.p.Forget("t", "ana")
		m := g.metrics(t)
		for _, want := range []string{signalForget + c.signal, printsForget + c.prints} {
			if !strings.Contains(m, want+"\n") {
				t.Errorf("%s: /metrics lacks %q", c.name, want)
			}
		}
	}
}
