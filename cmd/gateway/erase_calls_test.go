package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// eraseSecret is what the erased user said, which no request to a side
// model may carry once their erasure answered.
const eraseSecret = "Porto"

// sideModelFake is a side model (summariser, fact extraction) that
// records every request (upstreamtest) and holds each summary request
// open until the call is cancelled or the test ends; it answers the
// others with no facts.
type sideModelFake struct {
	up        *upstreamtest.Server
	held      chan struct{} // closed once a summary request is held
	cancelled chan struct{} // closed once a held request's caller hung up
	release   chan struct{}
	once      sync.Once
	gone      sync.Once
}

// newSideModelFake starts a sideModelFake, released when t ends.
func newSideModelFake(t *testing.T) *sideModelFake {
	f := &sideModelFake{held: make(chan struct{}), cancelled: make(chan struct{}), release: make(chan struct{})}
	answer := upstreamtest.Chat(upstreamtest.Reply{Content: `{"facts":[]}`})
	var heldOnce sync.Once
	f.up = upstreamtest.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !bytes.Contains(body, []byte("rolling summary")) {
			answer.ServeHTTP(w, r)
			return
		}
		heldOnce.Do(func() { close(f.held) })
		select {
		case <-f.release:
		case <-r.Context().Done():
			f.gone.Do(func() { close(f.cancelled) })
		}
	}))
	t.Cleanup(func() { f.once.Do(func() { close(f.release) }) })
	return f
}

// carrying counts the requests the fake received that carry the secret.
func (f *sideModelFake) carrying() int {
	n := 0
	for _, r := range f.up.Requests() {
		if bytes.Contains(r.Body, []byte(eraseSecret)) {
			n++
		}
	}
	return n
}

// eraseCallsConfig is the configuration of store over f: compaction of
// every turn by the side model, whose calls wait far longer than the
// test does, and fact extraction by it.
func eraseCallsConfig(t *testing.T, f *sideModelFake, store string) config.Config {
	cfg := storeConfigs(t, f.up)[store](t)
	cfg.Compaction.MaxMessages, cfg.Compaction.KeepMessages = 2, 1
	cfg.Compaction.Timeout = config.Duration(10 * time.Minute)
	return cfg
}

// saveSecret stores two turns of user's carrying the secret through m and
// returns them with their save results.
func saveSecret(t *testing.T, m *memoryLayer, user string) ([]memory.Exchange, []memory.SaveResult) {
	t.Helper()
	var exs []memory.Exchange
	var res []memory.SaveResult
	for _, text := range []string{"I live in " + eraseSecret + " by the river.", "My flat in " + eraseSecret + " has a blue door."} {
		ex := memory.Exchange{ID: record.NewExchangeID(), Identity: memory.Identity{Tenant: memory.DefaultTenant, User: user, Conversation: "c"},
			At: time.Now().UTC(), Turn: []memory.Message{{Role: "user", Content: text}}, Reply: memory.Message{Role: "assistant", Content: "Noted."}}
		r, err := m.store.SaveExchange(context.Background(), ex)
		if err != nil {
			t.Fatal(err)
		}
		exs, res = append(exs, ex), append(res, r)
	}
	return exs, res
}

// enrichRound runs m's after-save hooks over exs (record.RunHooks, which
// guards what they write), as an enricher's round that read them at epoch
// does, and returns a channel closed when done.
func enrichRound(m *memoryLayer, epoch uint64, exs []memory.Exchange, res []memory.SaveResult) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = record.RunHooks(cache.WithEpoch(context.Background(), epoch), m.hooks, exs, res)
	}()
	return done
}

// heldRound runs an enrichment round under epoch until the side model
// holds its summary call. A round can end without calling when a clear
// of the side calls (the Redis subscription starting, which clears every
// process cache) came after its epoch: it is run again under a fresh
// epoch, as the enricher retries such a round.
func heldRound(t *testing.T, m *memoryLayer, f *sideModelFake, epoch uint64, exs []memory.Exchange, res []memory.SaveResult) <-chan struct{} {
	t.Helper()
	for attempt := 0; attempt < 5; attempt++ {
		done := enrichRound(m, epoch, exs, res)
		select {
		case <-f.held:
			return done
		case <-done:
			epoch = cache.Epoch()
		case <-time.After(time.Minute):
			t.Fatal("timed out waiting for the summary call held by the side model")
		}
	}
	t.Fatal("five rounds ended without the summary call held by the side model")
	return nil
}

// assertNothingStored fails t unless nothing of user is stored in m.
func assertNothingStored(t *testing.T, m *memoryLayer, user string) {
	t.Helper()
	fp, err := m.store.Footprint(context.Background(), memory.DefaultTenant, user)
	if err != nil {
		t.Fatal(err)
	}
	if !fp.Empty() {
		t.Errorf("after the erasure, the store holds of %s: %+v", user, fp)
	}
}

// waitClosed waits for ch, failing t with what after a minute.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestErasureStopsTheSideModelCalls: an enrichment round read the user's
// turns (took its epoch) before the user was erased. When the round was
// already sending them to the summarising side model (which holds the
// call open), the erasure cancels that call; when its hooks run only
// after the erasure, none of them sends the turns. Either way no request
// carrying the user's words reaches the side model once the erasure has
// answered, and nothing of the user is stored when the round is over.
func TestErasureStopsTheSideModelCalls(t *testing.T) {
	for _, inFlight := range []bool{true, false} {
		for _, store := range []string{"sqlite", "postgres+redis"} {
			name := map[bool]string{true: "in flight", false: "not begun"}[inFlight] + "/" + store
			t.Run(name, func(t *testing.T) {
				f := newSideModelFake(t)
				m := openTestMemory(t, eraseCallsConfig(t, f, store))
				epoch := cache.Epoch()
				exs, res := saveSecret(t, m, "noor")
				var done <-chan struct{}
				if inFlight {
					done = heldRound(t, m, f, epoch, exs, res)
				}
				if err := m.store.DeleteUser(context.Background(), memory.DefaultTenant, "noor"); err != nil {
					t.Fatal(err)
				}
				sent := f.carrying()
				if inFlight {
					waitClosed(t, f.cancelled, "the erasure to cancel the summary call in flight")
				} else {
					done = enrichRound(m, epoch, exs, res)
				}
				waitClosed(t, done, "the round to end")
				if n := f.carrying(); n != sent {
					t.Errorf("%d requests carrying the erased user's words reached the side model after the erasure answered", n-sent)
				}
				assertNothingStored(t, m, "noor")
			})
		}
	}
}

// TestErasureNoticeCancelsTheOtherProcessCalls: two processes share one
// PostgreSQL and Redis. B's enrichment round is sending the user's words
// to the side model when A erases the user: A's erasure notice cancels
// B's call, and nothing of the user is stored once B's round is over.
func TestErasureNoticeCancelsTheOtherProcessCalls(t *testing.T) {
	f := newSideModelFake(t)
	cfg := eraseCallsConfig(t, f, "postgres+redis")
	a, b := openTestMemory(t, cfg), openTestMemory(t, cfg)
	epoch := cache.Epoch()
	exs, res := saveSecret(t, b, "noor")
	done := heldRound(t, b, f, epoch, exs, res)

	if err := a.store.DeleteUser(context.Background(), memory.DefaultTenant, "noor"); err != nil {
		t.Fatal(err)
	}
	a.Notices.Publish(memory.DefaultTenant, "noor")
	waitClosed(t, f.cancelled, "A's erasure notice to cancel B's summary call in flight")
	waitClosed(t, done, "B's round to end")
	assertNothingStored(t, a, "noor")
}
