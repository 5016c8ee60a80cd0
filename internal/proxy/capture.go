package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"time"

	"github.com/memgate/memgate/internal/capture"
	"github.com/memgate/memgate/internal/dialect/sse"
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

// chatCapture is the capture of one memory-on chat exchange: the upstream
// reply is copied as it is relayed, bounded and never blocking the client,
// and handed to the Capturer once the whole reply reached the client.
type chatCapture struct {
	p      *Proxy
	x      *server.Exchange
	id     memory.Identity
	model  string
	parsed []memory.Message
	// Exactly one of stream and reply is set once a 2xx response arrived.
	stream *tee
	reply  *copyBody
	done   bool
}

// attach tees resp's body into the capture.
func (c *chatCapture) attach(resp *http.Response) {
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct == "text/event-stream" {
		c.stream = newTee()
		resp.Body = &teeBody{ReadCloser: resp.Body, t: c.stream}
		return
	}
	c.reply = &copyBody{ReadCloser: resp.Body}
	resp.Body = c.reply
}

// finish hands the exchange to the Capturer: at once for a whole reply, on
// a goroutine (that Proxy.Wait waits for) for a stream whose events are
// still being reassembled.
func (c *chatCapture) finish(ctx context.Context) {
	c.done = true
	switch {
	case c.stream != nil:
		t := c.stream
		c.p.captures.Go(func() {
			reply, usage, err := t.result()
			if err != nil {
				c.skipped(err)
				return
			}
			c.capture(ctx, reply, usage)
		})
	case c.reply != nil:
		if c.reply.over {
			c.skipped(errCaptureTooLarge)
			return
		}
		reply, usage, err := capture.ReplyFromJSON(c.reply.buf.Bytes())
		if err != nil {
			c.skipped(err)
			return
		}
		c.capture(ctx, reply, usage)
	}
}

// abandon stops a capture that did not finish (the response was aborted).
func (c *chatCapture) abandon() {
	if !c.done && c.stream != nil {
		c.stream.abandon()
	}
}

func (c *chatCapture) skipped(err error) {
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
func (c *chatCapture) capture(ctx context.Context, reply memory.Message, usage *memory.Usage) {
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
		At:       time.Now(),
	})
}

// copyBody keeps a copy of the body read through it, up to
// maxCaptureBytes; past that it keeps nothing and marks itself over.
type copyBody struct {
	io.ReadCloser
	buf  bytes.Buffer
	over bool
}

func (b *copyBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && !b.over {
		if b.buf.Len()+n > maxCaptureBytes {
			b.over = true
			b.buf = bytes.Buffer{}
		} else {
			b.buf.Write(p[:n])
		}
	}
	return n, err
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

// tee feeds an event stream, as read, to a capture.StreamReply on its own
// goroutine through a bounded channel. The relay never waits for it: when
// the channel is full, or the stream outgrows maxCaptureBytes, the capture
// is given up, not the client.
type tee struct {
	ch    chan []byte
	done  chan struct{}
	bytes int
	lost  bool
	reply *capture.StreamReply
	err   error
}

func newTee() *tee {
	t := &tee{ch: make(chan []byte, teeDepth), done: make(chan struct{}), reply: capture.NewStreamReply()}
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

// run decodes the chunks as an event stream (sse.Decoder: multi-line data
// fields joined, CRLF and CR line ends, comments skipped) and passes each
// event but the [DONE] sentinel to the StreamReply.
func (t *tee) run() {
	defer close(t.done)
	dec := sse.NewDecoder(0, func(ev sse.Event) error {
		if p := bytes.TrimSpace(ev.Data); len(p) > 0 && string(p) != "[DONE]" {
			return t.reply.AddEvent(ev.Type, p)
		}
		return nil
	})
	for chunk := range t.ch {
		if t.err == nil {
			if _, err := dec.Write(chunk); err != nil {
				t.err = err
			}
		}
	}
	// A last event the upstream did not end with a blank line still counts.
	if t.err == nil {
		if _, err := dec.Write([]byte("\n\n")); err != nil {
			t.err = err
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
