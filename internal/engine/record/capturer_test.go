package record

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/redact"
)

// TestCaptureStoresBeforeReturning: Capture returns once the exchange is in
// the store, not in a buffer; the capture queue stays empty.
func TestCaptureStoresBeforeReturning(t *testing.T) {
	q, s := newFakeQueue(), newFakeSaver()
	c := mustCapturer(t, q, s, nil, Options{})
	for i := range 5 {
		c.Capture(context.Background(), exchange(t, fmt.Sprint("req", i), "hi", "hello"))
		if got := len(s.ids()); got != i+1 {
			t.Fatalf("after Capture %d the store holds %d exchanges", i, got)
		}
	}
	if n := len(q.payloads()); n != 0 {
		t.Fatalf("capture queue holds %d entries, want 0", n)
	}
	m := c.metrics
	if value(t, m.captured) != 5 || value(t, m.saved) != 5 || value(t, m.queued) != 0 || value(t, m.dropped) != 0 {
		t.Errorf("metrics captured=%v saved=%v queued=%v dropped=%v", value(t, m.captured), value(t, m.saved),
			value(t, m.queued), value(t, m.dropped))
	}
}

// TestCaptureMintsTheKey: the caller's id (a client's request id) becomes
// RequestID; the stored key is minted, so a reused request id stores both
// turns.
func TestCaptureMintsTheKey(t *testing.T) {
	s := newFakeSaver()
	c := mustCapturer(t, nil, s, nil, Options{})
	ex := exchange(t, "client-id", "first", "a")
	ex.At = time.Time{}
	c.Capture(context.Background(), ex)
	c.Capture(context.Background(), exchange(t, "client-id", "second", "b"))
	ids := s.ids()
	if len(ids) != 2 || ids[0] == ids[1] {
		t.Fatalf("stored ids %v, want two distinct", ids)
	}
	for _, id := range ids {
		got, _ := s.get(id)
		if !strings.HasPrefix(id, "ex-") || got.RequestID != "client-id" || got.At.IsZero() {
			t.Fatalf("stored %q with request id %q at %v", id, got.RequestID, got.At)
		}
	}
}

// TestStoreDownGoesToQueueInOrder: a save that fails twice sends the
// exchange to the capture queue, and the conversation's later turns follow
// it there even once the store is back, until the queue has drained.
func TestStoreDownGoesToQueueInOrder(t *testing.T) {
	q, s := newFakeQueue(), newFakeSaver()
	c := mustCapturer(t, q, s, nil, Options{})
	s.setFail(fmt.Errorf("pg: %w", memory.ErrUnavailable))
	c.Capture(context.Background(), exchange(t, "r1", "one", "a"))
	s.setFail(nil)
	c.Capture(context.Background(), exchange(t, "r2", "two", "b"))
	other := exchange(t, "r3", "elsewhere", "c")
	other.Conversation = "c2"
	c.Capture(context.Background(), other)
	if got := len(q.payloads()); got != 2 {
		t.Fatalf("queue holds %d entries, want 2 (the failed turn and the one after it)", got)
	}
	if got := len(s.ids()); got != 1 {
		t.Fatalf("store holds %d, want 1 (the other conversation)", got)
	}
	if calls := s.callCount(); calls != 3 {
		t.Errorf("save calls = %d, want 3 (a failure, its immediate retry, the other conversation)", calls)
	}
	// The worker drains the queue; then the conversation saves directly again.
	w := NewWorker(q, s, nil, fastWorker())
	mustRunWorker(t, w)
	waitFor(t, "queue drained and conversation released", func() bool { return !c.isQueued(other.Identity) && !c.isQueued(exchange(t, "x", "", "").Identity) })
	c.Capture(context.Background(), exchange(t, "r4", "four", "d"))
	var texts []string
	for _, id := range s.ids() {
		ex, _ := s.get(id)
		if ex.Conversation == "c1" {
			texts = append(texts, ex.Turn[0].Content)
		}
	}
	if want := []string{"one", "two", "four"}; !slices.Equal(texts, want) {
		t.Fatalf("stored turns %v, want %v", texts, want)
	}
}

// countsThenQueues is a capture queue whose Pending, the first time it
// counts no entry once armed, runs during before answering; later calls
// are counted in after.
type countsThenQueues struct {
	*fakeQueue
	armed  atomic.Bool
	once   sync.Once
	during func()
	after  atomic.Int64
	fired  atomic.Bool
}

func (q *countsThenQueues) Pending(ctx context.Context) (int64, error) {
	n, err := q.fakeQueue.Pending(ctx)
	if q.fired.Load() {
		q.after.Add(1)
	}
	if n == 0 && q.armed.Load() {
		q.once.Do(func() { q.during(); q.fired.Store(true) })
	}
	return n, err
}

// TestQueueDrainedWhileATurnIsQueued: the queue is seen drained, and before
// the conversations are released another turn goes to it. That turn's
// conversation stays behind it: its next turn follows it into the queue.
func TestQueueDrainedWhileATurnIsQueued(t *testing.T) {
	q, s := &countsThenQueues{fakeQueue: newFakeQueue()}, newFakeSaver()
	c := mustCapturer(t, q, s, nil, Options{})
	s.setFail(fmt.Errorf("pg: %w", memory.ErrUnavailable))
	c.Capture(context.Background(), exchange(t, "r1", "c1 one", "a"))
	other := func(id, text string) memory.Exchange {
		ex := exchange(t, id, text, "b")
		ex.Conversation = "c2"
		return ex
	}
	q.during = func() { c.Capture(context.Background(), other("r2", "c2 one")) }
	q.armed.Store(true)
	// A worker stores the first turn: the queue drains.
	ds, err := q.Claim(context.Background(), "w1", 10, time.Minute, 0)
	if err != nil || len(ds) != 1 {
		t.Fatalf("claim = %d, %v", len(ds), err)
	}
	if err := q.Ack(context.Background(), ds[0].ID); err != nil {
		t.Fatal(err)
	}
	// The pass that saw the queue drained ends releasing c2, or leaves it
	// for the next pass to count the queue again.
	waitFor(t, "the pass that saw the queue drained", func() bool {
		return q.fired.Load() && (q.after.Load() > 0 || !c.isQueued(other("", "").Identity))
	})
	s.setFail(nil)
	c.Capture(context.Background(), other("r3", "c2 two"))
	for _, id := range s.ids() {
		if ex, _ := s.get(id); ex.Conversation == "c2" {
			t.Fatalf("%q stored ahead of the turn before it, which waits in the queue", ex.Turn[0].Content)
		}
	}
	if got := len(q.payloads()); got != 2 {
		t.Fatalf("queue holds %d entries, want both turns of c2", got)
	}
}

// TestStoreDownNoQueueRetriesInOrder: without a capture queue, a failing
// store is retried until it returns, and the turns are stored in order.
func TestStoreDownNoQueueRetriesInOrder(t *testing.T) {
	s := newFakeSaver()
	s.setFail(fmt.Errorf("pg: %w", memory.ErrUnavailable))
	c := mustCapturer(t, nil, s, nil, Options{RetryBase: time.Millisecond, RetryMax: 5 * time.Millisecond, SaveWait: time.Millisecond})
	var want []string
	for i := range 10 {
		want = append(want, fmt.Sprint("turn ", i))
		c.Capture(context.Background(), exchange(t, "r", want[i], "ok"))
	}
	waitFor(t, "retries against the store", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.calls >= 5
	})
	s.setFail(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	var got []string
	for _, id := range s.ids() {
		ex, _ := s.get(id)
		got = append(got, ex.Turn[0].Content)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("stored %v, want %v", got, want)
	}
	if value(t, c.metrics.dropped) != 0 {
		t.Fatal("dropped exchanges")
	}
}

func TestCloseGivesUpAtDeadline(t *testing.T) {
	s := newFakeSaver()
	s.setFail(fmt.Errorf("pg: %w", memory.ErrUnavailable))
	c := New(nil, s, nil, nil, Options{RetryBase: time.Millisecond, RetryMax: time.Millisecond, SaveWait: time.Millisecond})
	for i := range 3 {
		c.Capture(context.Background(), exchange(t, fmt.Sprint("ex", i), "hi", "hello"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := c.Close(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want DeadlineExceeded", err)
	}
	if got := value(t, c.metrics.dropped); got != 3 {
		t.Fatalf("dropped = %v, want 3 (counted, not silent)", got)
	}
	// After Close, Capture neither blocks nor panics.
	c.Capture(context.Background(), exchange(t, "late", "hi", "hello"))
	if value(t, c.metrics.dropped) != 4 {
		t.Error("capture after Close not counted as dropped")
	}
}

// TestCaptureBoundedWhenFull: with the store hung and the lane full,
// Capture waits at most FullWait, then drops and counts the exchange.
func TestCaptureBoundedWhenFull(t *testing.T) {
	s := newGateSaver()
	c := New(nil, s, nil, nil, Options{Lanes: 1, Buffer: 2, FullWait: time.Millisecond, SaveWait: time.Millisecond, Batches: s, DeadLetters: s})
	for i := range 20 {
		c.Capture(context.Background(), exchange(t, fmt.Sprint("ex", i), "hi", "hello"))
	}
	dropped := value(t, c.metrics.dropped)
	if dropped < 16 || dropped > 17 { // one being saved, up to one more taken into its batch, two buffered
		t.Errorf("dropped = %v, want 16 or 17", dropped)
	}
	close(s.gate)
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := float64(len(s.ids())) + dropped; got != 20 {
		t.Errorf("stored+dropped = %v, want 20", got)
	}
}

// TestWaitCoversTheTurnBeingStored: Wait blocks while a turn of the
// conversation is being stored and returns when it is; other conversations
// never wait.
func TestWaitCoversTheTurnBeingStored(t *testing.T) {
	for _, how := range []string{"captured", "imported"} {
		t.Run(how, func(t *testing.T) { testWaitCovers(t, how) })
	}
}

func testWaitCovers(t *testing.T, how string) {
	s := newGateSaver()
	c := mustCapturer(t, nil, s, nil, Options{SaveWait: time.Millisecond, Batches: s, DeadLetters: s})
	ex := exchange(t, "r1", "hi", "hello")
	if how == "captured" {
		c.Capture(context.Background(), ex) // returns after SaveWait; the save hangs
	} else {
		go c.Import(context.Background(), []memory.Exchange{ex}) // returns once stored
		waitFor(t, "the import in its lane", func() bool { return value(t, c.metrics.captured) == 1 })
	}
	other := ex.Identity
	other.Conversation = "elsewhere"
	if waited, err := c.Wait(context.Background(), other); waited || err != nil {
		t.Fatalf("Wait for an idle conversation = %v, %v; want false, nil", waited, err)
	}
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.Wait(short, ex.Identity); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait while the turn is stored = %v, want DeadlineExceeded", err)
	}
	done := make(chan error, 1)
	go func() {
		waited, err := c.Wait(context.Background(), ex.Identity)
		if err == nil && !waited {
			err = errors.New("Wait while the turn is stored reported it did not wait")
		}
		done <- err
	}()
	waitFor(t, "Wait waiting", func() bool { return value(t, c.metrics.waits) == 2 })
	close(s.gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(s.ids()) != 1 {
		t.Fatal("turn not stored when Wait returned")
	}
}

// TestRefusedExchangeIsDeadLetteredOthersStored: an exchange the store
// refuses for good breaks the group commit; the batch is stored one by one,
// the bad one set aside, the others stored.
func TestRefusedExchangeIsDeadLetteredOthersStored(t *testing.T) {
	s := newGateSaver()
	s.refuse = func(ex memory.Exchange) bool { return strings.Contains(ex.Turn[0].Content, "bad") }
	c := mustCapturer(t, nil, s, nil, Options{Lanes: 1, Batches: s, DeadLetters: s})
	var wg sync.WaitGroup
	users := []string{"u1", "u2", "u3", "u4"}
	for _, u := range users {
		wg.Go(func() {
			text := "good"
			if u == "u2" {
				text = "bad"
			}
			ex := exchange(t, "r", text, "ok")
			ex.User = u
			c.Capture(context.Background(), ex)
		})
	}
	time.Sleep(10 * time.Millisecond) // let the four gather behind the gate
	close(s.gate)
	wg.Wait()
	if got := len(s.ids()); got != 3 {
		t.Fatalf("stored %d, want the 3 good ones", got)
	}
	if got := len(s.dead); got != 1 || s.dead[0].User != "u2" || !json.Valid(s.dead[0].Payload) {
		t.Fatalf("dead letters %+v, want u2's", s.dead)
	}
	if value(t, c.metrics.deadLetters) != 1 || value(t, c.metrics.dropped) != 0 {
		t.Fatalf("dead letters = %v dropped = %v", value(t, c.metrics.deadLetters), value(t, c.metrics.dropped))
	}
}

// TestGroupCommit: concurrent captures share transactions.
func TestGroupCommit(t *testing.T) {
	s := newGateSaver()
	c := mustCapturer(t, nil, s, nil, Options{Lanes: 1, Batches: s, DeadLetters: s})
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			ex := exchange(t, "r", "hi", "ok")
			ex.Conversation = fmt.Sprint("c", i)
			c.Capture(context.Background(), ex)
		})
	}
	time.Sleep(10 * time.Millisecond)
	close(s.gate)
	wg.Wait()
	if len(s.ids()) != 20 {
		t.Fatalf("stored %d, want 20", len(s.ids()))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groups == 0 {
		t.Fatal("no group commit")
	}
}

// TestStoredExchangesGoToEnrichment: each stored exchange is queued for
// enrichment with the messages it stored; duplicates too, erased ones not.
func TestStoredExchangesGoToEnrichment(t *testing.T) {
	s, enrich := newFakeSaver(), newFakeQueue()
	c := mustCapturer(t, nil, s, nil, Options{Enrich: enrich})
	ex := exchange(t, "r", "hi", "ok")
	ex.Prior = []memory.Message{{Role: "user", Content: "old"}, {Role: "assistant", Content: "older"}}
	c.Capture(context.Background(), ex)
	waitFor(t, "enrichment entry", func() bool { return len(enrich.payloads()) == 1 })
	ps := enrich.payloads()
	en, err := DecodeEnrichment(ps[0])
	if err != nil {
		t.Fatal(err)
	}
	// The fake saver stores turn + reply only: no prior message was stored.
	if en.Result.Inserted != 2 || len(en.Exchange.Prior) != 0 || en.Exchange.Turn[0].Content != "hi" {
		t.Fatalf("enrichment entry %+v", en)
	}
}

func TestCaptureRedactsAndSanitizesBeforeStoring(t *testing.T) {
	r, err := redact.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	secret := "sk-" + strings.Repeat("Zq7", 10)
	q, s := newFakeQueue(), newFakeSaver()
	s.setFail(errDown) // to the queue, so both paths are checked
	c := mustCapturer(t, q, s, r, Options{})
	ex := exchange(t, "ex1", "my key is "+secret, "noted")
	ex.Turn[0].Content += "\x00"
	ex.Turn[0].Raw = json.RawMessage(`{"role":"user","content":"my key is ` + secret + `\u0000"}`)
	ex.Model = "gpt\xff"
	reply, err := memory.ParseMessage(json.RawMessage(`{"content":null,"role":"assistant","tool_calls":[{"function":{"arguments":"{\"card\":\"4111 1111 1111 1111\"}","name":"charge"},"id":"c","type":"function"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ex.Reply = reply
	ex.Prior = []memory.Message{exchange(t, "p", "earlier "+secret, "x").Turn[0]}
	c.Capture(context.Background(), ex)
	payloads := q.payloads()
	if len(payloads) != 1 {
		t.Fatalf("payloads = %d", len(payloads))
	}
	p := payloads[0]
	for _, leaked := range []string{secret, "4111 1111", `\u0000`, "\xff"} {
		if bytes.Contains(p, []byte(leaked)) {
			t.Errorf("queue payload holds %q: %s", leaked, p)
		}
	}
	for _, want := range []string{"[redacted:openai_key]", "[redacted:card]"} {
		if !bytes.Contains(p, []byte(want)) {
			t.Errorf("payload lacks %s: %s", want, p)
		}
	}
	if value(t, c.metrics.redacted) != 3 {
		t.Errorf("redacted = %v, want 3 (prior, turn, reply)", value(t, c.metrics.redacted))
	}
	if value(t, c.metrics.sanitized) == 0 {
		t.Error("sanitized not counted")
	}
	// The caller's exchange is untouched: redaction works on copies.
	if !strings.Contains(ex.Turn[0].Content, secret) {
		t.Error("Capture modified the caller's messages")
	}
}

var _ Redactor = (*redact.Redactor)(nil)
