package upstreamtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// decodeJSON reads the request body into v, ignoring errors.
func decodeJSON(r *http.Request, v any) { _ = json.NewDecoder(r.Body).Decode(v) }

// feedCmd is one step a test tells a Feed to take.
type feedCmd struct {
	raw   string
	end   bool
	close bool
	abort bool
}

// Feed is a slow SSE stream driven by the test: it serves one request,
// writes the response headers at once, and then writes each event only when
// the test releases it. It reports when the request arrived and when the
// request's context ended before the stream did (the gateway cancelled it).
type Feed struct {
	cmds      chan feedCmd
	started   chan struct{}
	canceled  chan struct{}
	startOnce sync.Once
}

// NewFeed returns a Feed waiting for its request.
func NewFeed() *Feed {
	return &Feed{
		cmds:     make(chan feedCmd),
		started:  make(chan struct{}),
		canceled: make(chan struct{}),
	}
}

// ServeHTTP streams the events the test releases.
func (f *Feed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	startSSE(w)
	f.startOnce.Do(func() { close(f.started) })
	rc := http.NewResponseController(w)
	for {
		select {
		case <-r.Context().Done():
			close(f.canceled)
			return
		case c := <-f.cmds:
			switch {
			case c.abort:
				panic(http.ErrAbortHandler)
			case c.end:
				fmt.Fprint(w, "data: [DONE]\n\n")
				rc.Flush()
				return
			case c.close:
				return
			}
			fmt.Fprint(w, c.raw)
			rc.Flush()
		}
	}
}

// Started is closed when the request arrived and the headers were sent.
func (f *Feed) Started() <-chan struct{} { return f.started }

// Canceled is closed when the request's context ended while the stream was
// still open: the gateway cancelled the upstream request.
func (f *Feed) Canceled() <-chan struct{} { return f.canceled }

func (f *Feed) send(tb testing.TB, c feedCmd) {
	tb.Helper()
	select {
	case f.cmds <- c:
	case <-f.canceled:
		tb.Fatal("upstreamtest: feed request was canceled")
	case <-time.After(10 * time.Second):
		tb.Fatal("upstreamtest: feed not consumed within 10s")
	}
}

// Send releases one "data: <payload>\n\n" event and waits until the handler
// took it.
func (f *Feed) Send(tb testing.TB, payload string) {
	tb.Helper()
	f.send(tb, feedCmd{raw: "data: " + payload + "\n\n"})
}

// SendRaw releases raw bytes verbatim.
func (f *Feed) SendRaw(tb testing.TB, raw string) {
	tb.Helper()
	f.send(tb, feedCmd{raw: raw})
}

// End sends "data: [DONE]" and completes the response.
func (f *Feed) End(tb testing.TB) {
	tb.Helper()
	f.send(tb, feedCmd{end: true})
}

// Close completes the response as it stands, without "data: [DONE]" (the
// Anthropic and Responses streams end with their own events).
func (f *Feed) Close(tb testing.TB) {
	tb.Helper()
	f.send(tb, feedCmd{close: true})
}

// Break aborts the response mid-stream: the connection is cut without a
// proper end, as when an upstream crashes.
func (f *Feed) Break(tb testing.TB) {
	tb.Helper()
	f.send(tb, feedCmd{abort: true})
}
