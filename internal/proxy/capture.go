package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
)

// maxCaptureBytes caps the copy of a reply kept for capture; the reply
// itself streams through to the client whatever its size.
const maxCaptureBytes = 4 << 20

// teeDepth bounds the chunks waiting for a stream's capture goroutine.
const teeDepth = 256

// Reasons an exchange is not captured (the capture_skipped metric's label).
const (
	skipUnreadable = "unreadable"
	skipTooLarge   = "too_large"
	skipOverflow   = "overflow"
)

var (
	errCaptureTooLarge = errors.New("reply larger than the capture cap")
	errTeeOverflow     = errors.New("capture tee fell behind the stream")
)

// exchangeCapture is the capture of one memory-on exchange of any API: the
// upstream reply is copied as it is relayed, bounded and never blocking the
// client, read back by the API's reply reader or stream reassembler, and
// handed to the Capturer.
type exchangeCapture struct {
	p      *Proxy
	x      *server.Exchange
	api    *api
	id     memory.Identity
	model  string
	parsed []memory.Message
	// at is when the request arrived: the exchange's time, so a request
	// that began before an erasure of its user counts as erased data even
	// when its reply ends after it.
	at time.Time
	// candidate and derived are the exchange's memory.Exchange.Candidate
	// and Derived.
	candidate string
	derived   bool
	// stream is set once a 2xx event stream arrived.
	stream *tee
	// done is set once the exchange was handed on or given up.
	done bool
}

// attach tees resp's body into the capture. A whole (non-stream) reply is
// read here, up to maxCaptureBytes, and handed to the Capturer before any
// of it is written to the client: a turn the client has an answer for is
// then durable (Capture returns once it is stored or queued), so a crash
// between the answer and the queue loses nothing. A read error fails the
// response before it starts (a 502), never a truncated 200.
func (c *exchangeCapture) attach(ctx context.Context, resp *http.Response) error {
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct == "text/event-stream" {
		c.stream = newTee(c.api.stream())
		resp.Body = &teeBody{ReadCloser: resp.Body, t: c.stream}
		return nil
	}
	c.done = true
	buf, err := io.ReadAll(io.LimitReader(resp.Body, maxCaptureBytes+1))
	if err != nil {
		return fmt.Errorf("read upstream reply: %w", err)
	}
	if len(buf) > maxCaptureBytes {
		c.skipped(errCaptureTooLarge)
		resp.Body = readCloser{Reader: io.MultiReader(bytes.NewReader(buf), resp.Body), Closer: resp.Body}
		return nil
	}
	resp.Body = readCloser{Reader: bytes.NewReader(buf), Closer: resp.Body}
	reply, usage, err := c.api.reply(buf)
	if err != nil {
		c.skipped(err)
		return nil
	}
	c.capture(ctx, reply, usage)
	return nil
}

// readCloser reads from Reader and closes Closer.
type readCloser struct {
	io.Reader
	io.Closer
}

// finish hands a stream's exchange to the Capturer on a goroutine (that
// Proxy.Wait waits for) once its events are reassembled; a whole reply was
// captured by attach already.
func (c *exchangeCapture) finish(ctx context.Context) {
	if c.done {
		return
	}
	c.done = true
	if t := c.stream; t != nil {
		c.p.captures.Go(func() {
			reply, usage, err := t.result()
			if err != nil {
				c.skipped(err)
				return
			}
			c.capture(ctx, reply, usage)
		})
	}
}

// abandon stops a capture that did not finish (the response was aborted).
func (c *exchangeCapture) abandon() {
	if !c.done && c.stream != nil {
		c.stream.abandon()
	}
}

func (c *exchangeCapture) skipped(err error) {
	reason := skipUnreadable
	switch {
	case errors.Is(err, errCaptureTooLarge):
		reason = skipTooLarge
	case errors.Is(err, errTeeOverflow):
		reason = skipOverflow
	}
	c.p.m.captureDr.WithLabelValues(reason).Inc()
	c.p.log.LogAttrs(context.Background(), slog.LevelWarn, "exchange not captured",
		slog.String("request_id", c.x.ID()), slog.String("reason", reason), slog.String("error", err.Error()))
}

// capture hands a completed exchange to the Capturer, detached from the
// client's context so a hang-up never loses the turn.
func (c *exchangeCapture) capture(ctx context.Context, reply memory.Message, usage *memory.Usage) {
	nonSystem := make([]memory.Message, 0, len(c.parsed))
	for _, m := range c.parsed {
		if !memory.IsSystem(m.Role) {
			nonSystem = append(nonSystem, m)
		}
	}
	prior, turn := memory.SplitTurn(nonSystem)
	c.p.deps.Capturer.Capture(context.WithoutCancel(ctx), memory.Exchange{
		ID:       c.x.ID(),
		Identity: c.id,
		Model:    c.model,
		Prior:    prior,
		Turn:     turn,
		Reply:    reply,
		Usage:    usage,
		At:       c.at,

		Candidate: c.candidate,
		Derived:   c.derived,
	})
}

// teeBody passes what is read through it to a tee.
type teeBody struct {
	io.ReadCloser
	t *tee
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.t.feed(p[:n])
	}
	return n, err
}

// tee feeds an event stream, as read, to the API's replyStream on its own
// goroutine through a bounded channel. The relay never waits for it: when
// the channel is full, or the stream outgrows maxCaptureBytes, the capture
// is given up, not the client.
type tee struct {
	ch    chan []byte
	done  chan struct{}
	bytes int
	lost  bool
	reply replyStream
	err   error
}

func newTee(reply replyStream) *tee {
	t := &tee{ch: make(chan []byte, teeDepth), done: make(chan struct{}), reply: reply}
	go t.run()
	return t
}

// feed queues a copy of chunk, or gives the capture up.
func (t *tee) feed(chunk []byte) {
	if t.lost {
		return
	}
	if t.bytes += len(chunk); t.bytes > maxCaptureBytes {
		t.lost = true
		return
	}
	select {
	case t.ch <- bytes.Clone(chunk):
	default:
		t.lost = true
	}
}

// run writes the chunks to the replyStream until the first error.
func (t *tee) run() {
	defer close(t.done)
	for chunk := range t.ch {
		if t.err == nil {
			_, t.err = t.reply.Write(chunk)
		}
	}
}

// result waits for the queued chunks and returns the reassembled reply.
func (t *tee) result() (memory.Message, *memory.Usage, error) {
	close(t.ch)
	<-t.done
	switch {
	case t.lost:
		return memory.Message{}, nil, errTeeOverflow
	case t.err != nil:
		return memory.Message{}, nil, t.err
	}
	return t.reply.Result()
}

// abandon stops the tee without a result.
func (t *tee) abandon() { close(t.ch) }
