package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/engine"
	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/engine/prompt"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/tokens"
)

// countingRevisions counts the reads of a user's revision counters.
type countingRevisions struct {
	st    *sqlite.Store
	reads atomic.Int64
}

func (c *countingRevisions) ItemRevisions(ctx context.Context, tenant, user string) (memory.Revisions, error) {
	c.reads.Add(1)
	return c.st.ItemRevisions(ctx, tenant, user)
}

// routerReads is what the Router reads: the counted revisions, the heads
// kept by the engine's cache.
type routerReads struct {
	*countingRevisions
	reads *cache.Reads
}

func (r routerReads) Head(ctx context.Context, rev *memory.Revisions, id memory.Identity, n int) ([]memory.Print, error) {
	return r.reads.Head(ctx, rev, id, n)
}

// gatedSaver holds every save until gate is closed.
type gatedSaver struct {
	record.Saver
	gate chan struct{}
}

func (g gatedSaver) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	<-g.gate
	return g.Saver.SaveExchange(ctx, ex)
}

// routedCore is an engine over a SQLite store wired as the gateway wires
// it (the cache's reads for the prompt and the Router, captures saved
// through them), counting the revision reads.
type routedCore struct {
	e    *engine.Engine
	revs *countingRevisions
	cap  *record.Capturer
	gate chan struct{} // nil: saves are not held
}

func newRoutedCore(t testing.TB, held bool) *routedCore {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "memgate.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	reads := cache.NewReads(st, nil, cache.DefaultTailBytes, cache.DefaultKnowledgeBytes)
	revs := &countingRevisions{st: st}
	counter, err := tokens.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	asm, err := prompt.NewAssembler(prompt.Deps{History: reads, Facts: reads, Revisions: revs, Counter: counter},
		prompt.Options{RecentMessages: 20, MaxContextTokens: 8000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc := &routedCore{revs: revs}
	var saver record.Saver = reads
	if held {
		rc.gate = make(chan struct{})
		saver = gatedSaver{Saver: reads, gate: rc.gate}
	}
	router := record.NewRouter(routerReads{revs, reads}, nil, nil, nil)
	rc.cap = record.New(nil, saver, nil, nil, record.Options{Router: router, SaveWait: time.Minute})
	t.Cleanup(func() {
		if rc.gate != nil {
			select {
			case <-rc.gate:
			default:
				close(rc.gate)
			}
		}
		_ = rc.cap.Close(context.Background())
	})
	rc.e = engine.New(engine.Options{}, nil)
	rc.e.Use(&engine.Core{Store: st, Prompt: asm, Capturer: rc.cap, Router: router})
	return rc
}

// chat is a headerless full-history chat's request, n exchanges in.
func chat(n int) []memory.Message {
	msgs := []memory.Message{{Role: "system", Content: "You are helpful."}}
	for i := range n {
		msgs = append(msgs, memory.Message{Role: "user", Content: fmt.Sprint("question ", i)},
			memory.Message{Role: "assistant", Content: fmt.Sprint("answer ", i)})
	}
	return append(msgs, memory.Message{Role: "user", Content: fmt.Sprint("question ", n)})
}

// request routes and prepares msgs as the proxy does for a request that
// names no conversation, and returns its conversation.
func (rc *routedCore) request(t testing.TB, msgs []memory.Message) memory.Identity {
	return rc.requestWith(t, msgs, true)
}

// requestWith is request; handOn false drops the counters routing read,
// so Prepare reads them again (as before they were handed on).
func (rc *routedCore) requestWith(t testing.TB, msgs []memory.Message, handOn bool) memory.Identity {
	t.Helper()
	ctx := context.Background()
	id := memory.Identity{Tenant: "acme", User: "ana"}
	id.Conversation = memory.ImpliedConversation(id.Tenant, id.User, msgs)
	var rev *memory.Revisions
	if id.Conversation != memory.DefaultConversation {
		routed := rc.e.Route(ctx, id, msgs, memory.CutRequest(msgs, 0))
		id.Conversation, rev = routed.Conversation, routed.Revisions
	}
	if !handOn {
		rev = nil
	}
	req := memory.Request{Identity: id, Mode: memory.ModeOn, Model: "gpt-4o", Messages: msgs, Revisions: rev}
	if _, err := rc.e.Prepare(ctx, req); err != nil {
		t.Fatal(err)
	}
	return id
}

// captureTurn captures the newest turn of msgs, as the proxy does once
// its answer is sent.
func (rc *routedCore) captureTurn(id memory.Identity, msgs []memory.Message, n int) {
	rc.cap.Capture(context.Background(), memory.Exchange{
		ID: fmt.Sprint("ex-", n), Identity: id, Model: "gpt-4o",
		Prior: msgs[1 : len(msgs)-1], Turn: msgs[len(msgs)-1:],
		Reply:      memory.Message{Role: "assistant", Content: fmt.Sprint("answer ", n)},
		BranchSeed: memory.BranchSeed(id.Tenant, id.User, msgs),
		At:         time.Now().UTC(),
	})
}

// TestRoutedRequestReadsRevisionsOnce: a request naming no conversation
// that resends its history reads the user's revision counters once, for
// routing and for its prompt alike; every request reads its own (the
// counters are never kept from one request to the next, so another
// gateway's writes are seen); and a request whose conversation had a
// turn being stored when it was routed reads them again once it is
// stored, so its prompt is as current as that turn.
func TestRoutedRequestReadsRevisionsOnce(t *testing.T) {
	t.Run("one read per request", func(t *testing.T) {
		rc := newRoutedCore(t, false)
		for n := range 3 {
			msgs := chat(n)
			before := rc.revs.reads.Load()
			id := rc.request(t, msgs)
			if got := rc.revs.reads.Load() - before; got != 1 {
				t.Fatalf("request %d read the revision counters %d times, want 1", n, got)
			}
			rc.captureTurn(id, msgs, n)
		}
	})
	t.Run("read again after a turn stored", func(t *testing.T) {
		rc := newRoutedCore(t, true)
		first := chat(1)
		id := rc.request(t, first)
		go rc.captureTurn(id, first, 1) // held until gate closes
		eventually(t, "the turn in flight", func() bool {
			return gauge(t, rc.cap.Collectors(), "memgate_capture_inflight") == 1
		})
		// Route gives up waiting for it (its wait is half of a short
		// deadline), Prepare waits until it is stored.
		next := chat(2)
		ctx := context.Background()
		rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		routed := rc.e.Route(rctx, id, next, memory.CutRequest(next, 0))
		rev := routed.Revisions
		cancel()
		if rev != nil {
			t.Fatalf("Route handed on revisions read while a turn of %s was being stored", routed.Conversation)
		}
		before := rc.revs.reads.Load()
		done := make(chan error, 1)
		go func() {
			_, err := rc.e.Prepare(ctx, memory.Request{Identity: id, Mode: memory.ModeOn, Model: "gpt-4o", Messages: next,
				Revisions: &memory.Revisions{}})
			done <- err
		}()
		eventually(t, "Prepare waiting for the turn", func() bool {
			return gauge(t, rc.cap.Collectors(), "memgate_capture_read_waits_total") >= 2
		})
		close(rc.gate)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := rc.revs.reads.Load() - before; got != 1 {
			t.Fatalf("Prepare after waiting for a turn read the revision counters %d times, want 1 (the ones it was given predate the turn)", got)
		}
	})
}

// gauge reads the value of the collector named name among cs.
func gauge(t *testing.T, cs []prometheus.Collector, name string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(cs...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// eventually polls cond until it holds, failing the test after a minute.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkRoutedRequest measures what memory adds to a headerless
// full-history request of a chat of n exchanges held in a SQLite store,
// going on: routing it and preparing its prompt, with the revision
// counters routing read handed on to the prompt (handed) or read again
// (reread, as before they were).
func BenchmarkRoutedRequest(b *testing.B) {
	for _, n := range []int{20, 200} {
		for _, how := range []string{"reread", "handed"} {
			b.Run(fmt.Sprint(n, "exchanges/", how), func(b *testing.B) {
				rc := newRoutedCore(b, false)
				for i := 1; i <= n; i++ {
					msgs := chat(i)
					id := memory.Identity{Tenant: "acme", User: "ana", Conversation: memory.ImpliedConversation("acme", "ana", msgs)}
					rc.captureTurn(id, msgs, i)
				}
				next := chat(n + 1)
				b.ReportAllocs()
				for b.Loop() {
					rc.requestWith(b, next, how == "handed")
				}
			})
		}
	}
}
