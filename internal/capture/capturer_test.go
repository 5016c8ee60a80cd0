package capture

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/redact"
)

func TestCapturerPaths(t *testing.T) {
	tests := []struct {
		name         string
		queueNil     bool
		queueFail    bool
		wantEnqueued int
		wantDirect   int // fallback-direct counter
		wantSaved    int // saved by the capturer itself
	}{
		{name: "queue up", wantEnqueued: 5},
		{name: "queue down falls back to direct save", queueFail: true, wantDirect: 5, wantSaved: 5},
		{name: "no queue saves directly", queueNil: true, wantSaved: 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, s := newFakeQueue(), newFakeSaver()
			if tc.queueFail {
				q.setFail(errDown)
			}
			var queue Queue = q
			if tc.queueNil {
				queue = nil
			}
			c := mustCapturer(t, queue, s, nil, Options{})
			for i := range 5 {
				c.Capture(context.Background(), exchange(t, fmt.Sprint("ex", i), "hi", "hello"))
			}
			if err := c.Close(context.Background()); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if got := len(q.payloads()); got != tc.wantEnqueued {
				t.Errorf("enqueued = %d, want %d", got, tc.wantEnqueued)
			}
			if got := len(s.ids()); got != tc.wantSaved {
				t.Errorf("saved directly = %d, want %d", got, tc.wantSaved)
			}
			m := c.metrics
			if value(t, m.captured) != 5 || value(t, m.enqueued) != float64(tc.wantEnqueued) ||
				value(t, m.direct) != float64(tc.wantDirect) || value(t, m.saved) != float64(tc.wantSaved) ||
				value(t, m.dropped) != 0 {
				t.Errorf("metrics captured=%v enqueued=%v direct=%v saved=%v dropped=%v", value(t, m.captured),
					value(t, m.enqueued), value(t, m.direct), value(t, m.saved), value(t, m.dropped))
			}
		})
	}
}

// TestCaptureBoundedWhenFull: with the queue hung and the buffer full,
// Capture waits at most FullWait, then drops and counts the exchange.
func TestCaptureBoundedWhenFull(t *testing.T) {
	q, s := newFakeQueue(), newFakeSaver()
	release := make(chan struct{})
	q.block = release // every Enqueue hangs until released
	c := New(q, s, nil, nil, Options{Buffer: 2, FullWait: time.Millisecond})
	done := make(chan struct{})
	go func() {
		for i := range 50 {
			c.Capture(context.Background(), exchange(t, fmt.Sprint("ex", i), "hi", "hello"))
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Capture blocked past FullWait while the queue hung")
	}
	dropped := value(t, c.metrics.dropped)
	if dropped < 47 || dropped > 48 { // one in flight in pump, two buffered
		t.Errorf("dropped = %v, want 47 or 48", dropped)
	}
	close(release)
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := float64(len(q.payloads())) + dropped; got != 50 {
		t.Errorf("enqueued+dropped = %v, want 50", got)
	}
	// After Close, Capture neither blocks nor panics.
	c.Capture(context.Background(), exchange(t, "late", "hi", "hello"))
	if value(t, c.metrics.dropped) != dropped+1 {
		t.Error("capture after Close not counted as dropped")
	}
}

// TestCaptureWaitsForRoom: a burst larger than the buffer is not dropped
// when the queue frees room within FullWait.
func TestCaptureWaitsForRoom(t *testing.T) {
	q, s := newFakeQueue(), newFakeSaver()
	release := make(chan struct{})
	q.block = release
	c := New(q, s, nil, nil, Options{Buffer: 2, FullWait: time.Minute})
	done := make(chan struct{})
	go func() {
		for i := range 20 {
			c.Capture(context.Background(), exchange(t, fmt.Sprint("ex", i), "hi", "hello"))
		}
		close(done)
	}()
	close(release) // the queue comes back while Capture waits
	<-done
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := value(t, c.metrics.dropped); d != 0 {
		t.Fatalf("dropped = %v, want 0", d)
	}
	if n := len(q.payloads()); n != 20 {
		t.Fatalf("enqueued = %d, want 20", n)
	}
}

func TestCapturerRetriesUntilStoreReturns(t *testing.T) {
	q, s := newFakeQueue(), newFakeSaver()
	q.setFail(errDown)
	s.setFail(errDown)
	c := mustCapturer(t, q, s, nil, Options{RetryBase: time.Millisecond, RetryMax: 5 * time.Millisecond, RetryBuffer: 2})
	var want []string
	for i := range 10 {
		id := fmt.Sprint("ex", i)
		want = append(want, id)
		c.Capture(context.Background(), exchange(t, id, "hi", "hello"))
	}
	waitFor(t, "retries against the store", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.calls >= 5
	})
	if got := value(t, c.metrics.failures); got < 5 {
		t.Errorf("failures = %v, want several", got)
	}
	if len(s.ids()) != 0 {
		t.Fatal("saved while the store was down")
	}
	s.setFail(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := s.ids(); !slices.Equal(got, want) {
		t.Fatalf("saved %v, want %v in order", got, want)
	}
	if value(t, c.metrics.dropped) != 0 {
		t.Fatal("dropped exchanges")
	}
}

func TestCloseGivesUpAtDeadline(t *testing.T) {
	s := newFakeSaver()
	s.setFail(errDown)
	c := New(nil, s, nil, nil, Options{RetryBase: time.Millisecond, RetryMax: time.Millisecond})
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
}

func TestStoreRejectionIsNotRetriedForever(t *testing.T) {
	s := newFakeSaver()
	s.setFail(fmt.Errorf("save: %w", memory.ErrInvalid))
	c := mustCapturer(t, nil, s, nil, Options{})
	c.Capture(context.Background(), exchange(t, "bad", "hi", "hello"))
	if err := c.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if value(t, c.metrics.dropped) != 1 || s.calls != 1 {
		t.Fatalf("dropped = %v calls = %d, want 1 and 1", value(t, c.metrics.dropped), s.calls)
	}
}

func TestCaptureRedactsBeforeEnqueue(t *testing.T) {
	r, err := redact.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	secret := "sk-" + strings.Repeat("Zq7", 10)
	q, s := newFakeQueue(), newFakeSaver()
	c := mustCapturer(t, q, s, r, Options{})
	ex := exchange(t, "ex1", "my key is "+secret, "noted")
	reply, _, err := ReplyFromJSON([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"charge","arguments":"{\"card\":\"4111 1111 1111 1111\"}"}}]}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ex.Reply = reply
	ex.Prior = []memory.Message{exchange(t, "p", "earlier "+secret, "x").Turn[0]}
	c.Capture(context.Background(), ex)
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	payloads := q.payloads()
	if len(payloads) != 1 {
		t.Fatalf("payloads = %d", len(payloads))
	}
	p := payloads[0]
	for _, leaked := range []string{secret, "4111 1111"} {
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
	// The caller's exchange is untouched: redaction works on copies.
	if !strings.Contains(ex.Turn[0].Content, secret) {
		t.Error("Capture modified the caller's messages")
	}
}

func TestCaptureAssignsIDAndTime(t *testing.T) {
	s := newFakeSaver()
	c := mustCapturer(t, nil, s, nil, Options{})
	ex := exchange(t, "", "hi", "hello")
	ex.At = time.Time{}
	c.Capture(context.Background(), ex)
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ids := s.ids()
	if len(ids) != 1 || !strings.HasPrefix(ids[0], "cap-") {
		t.Fatalf("ids = %v", ids)
	}
	got, _ := s.get(ids[0])
	if got.At.IsZero() {
		t.Fatal("At not set")
	}
}

var _ Redactor = (*redact.Redactor)(nil)
