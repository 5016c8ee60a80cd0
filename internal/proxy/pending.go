package proxy

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/memgate/memgate/internal/dialect/responses"
	"github.com/memgate/memgate/internal/memory"
)

// Background responses. A Responses request with background: true is
// answered at once, queued or in_progress, with no output: the answer
// comes later, to the client's GET /v1/responses/{id} (polled until the
// response is done, or streamed with stream=true). The exchange's capture
// is held here, in this process, until a GET of the same tenant's user
// returns the response done: completed or incomplete, it is captured
// then, once; cancelled or failed, nothing is. The pending captures are
// bounded (pendingMax, pendingMaxBytes) and expire (pendingTTL): a turn
// answered later, evicted, or held by another process (or one restarted
// since) is not stored, and counted as background_lost.

const (
	// pendingMax bounds the background responses awaiting their answer.
	pendingMax = 1024
	// pendingMaxBytes bounds the messages their captures hold.
	pendingMaxBytes = 64 << 20
	// pendingTTL is how long a background response's capture waits for
	// its answer.
	pendingTTL = time.Hour
)

// skipBackgroundLost is the capture_skipped reason of a background
// response whose capture was given up before its answer came (evicted,
// expired, or too large to hold).
const skipBackgroundLost = "background_lost"

var errBackgroundLost = errors.New("the background response's capture was given up before its answer came")

// pendingKey names a background response of a tenant's user.
type pendingKey struct{ tenant, user, id string }

// pendingEntry is one held capture.
type pendingEntry struct {
	key     pendingKey
	c       *exchangeCapture
	size    int
	expires time.Time
}

// pendingResponses holds the captures of background responses until
// their answer comes, oldest first. It is safe for concurrent use.
type pendingResponses struct {
	mu    sync.Mutex
	ll    *list.List // of *pendingEntry, oldest first
	m     map[pendingKey]*list.Element
	bytes int
	now   func() time.Time
	// lost counts a capture given up (evicted, expired, too large).
	lost func(c *exchangeCapture)
}

func newPendingResponses(now func() time.Time, lost func(*exchangeCapture)) *pendingResponses {
	return &pendingResponses{ll: list.New(), m: map[pendingKey]*list.Element{}, now: now, lost: lost}
}

// captureSize is about what c holds of the request's messages.
func captureSize(c *exchangeCapture) int {
	n := 0
	for _, ms := range [][]memory.Message{c.msgs, c.cut.Prior, c.cut.Turn} {
		for _, m := range ms {
			n += len(m.Raw) + len(m.Content) + 64
		}
	}
	return n
}

// hold keeps c until the answer of k's response comes, evicting the
// oldest captures past the bounds (and those expired).
func (p *pendingResponses) hold(k pendingKey, c *exchangeCapture) {
	size := captureSize(c)
	if size > pendingMaxBytes {
		p.lost(c)
		return
	}
	p.mu.Lock()
	var lost []*exchangeCapture
	if el, ok := p.m[k]; ok {
		p.remove(el) // the provider never repeats an id; keep the newest
	}
	now := p.now()
	for el := p.ll.Front(); el != nil; el = p.ll.Front() {
		e := el.Value.(*pendingEntry)
		if p.ll.Len() < pendingMax && p.bytes+size <= pendingMaxBytes && now.Before(e.expires) {
			break
		}
		p.remove(el)
		lost = append(lost, e.c)
	}
	p.m[k] = p.ll.PushBack(&pendingEntry{key: k, c: c, size: size, expires: now.Add(pendingTTL)})
	p.bytes += size
	p.mu.Unlock()
	for _, c := range lost {
		p.lost(c)
	}
}

// remove drops el; the caller holds mu.
func (p *pendingResponses) remove(el *list.Element) {
	e := p.ll.Remove(el).(*pendingEntry)
	delete(p.m, e.key)
	p.bytes -= e.size
}

// has reports whether k's response has a capture held, not expired.
func (p *pendingResponses) has(k pendingKey) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	el, ok := p.m[k]
	return ok && p.now().Before(el.Value.(*pendingEntry).expires)
}

// empty reports whether no capture is held.
func (p *pendingResponses) empty() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ll.Len() == 0
}

// claim takes k's capture, once: nil when none is held (another GET
// claimed it, or it expired).
func (p *pendingResponses) claim(k pendingKey) *exchangeCapture {
	p.mu.Lock()
	el, ok := p.m[k]
	if !ok {
		p.mu.Unlock()
		return nil
	}
	p.remove(el)
	e := el.Value.(*pendingEntry)
	expired := !p.now().Before(e.expires)
	p.mu.Unlock()
	if expired {
		p.lost(e.c)
		return nil
	}
	return e.c
}

// forget drops the captures of tenant's user (erased, or a conversation
// of theirs deleted).
func (p *pendingResponses) forget(tenant, user string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for el := p.ll.Front(); el != nil; {
		next := el.Next()
		if k := el.Value.(*pendingEntry).key; k.tenant == tenant && k.user == user {
			p.remove(el)
		}
		el = next
	}
}

// holdBackground keeps c, whose reply is the background response id not
// done yet, until a GET of its tenant's user returns it done.
func (c *exchangeCapture) holdBackground(id string) {
	c.p.pending.hold(pendingKey{tenant: c.id.Tenant, user: c.id.User, id: id}, c)
	c.p.log.LogAttrs(context.Background(), slog.LevelDebug, "background response: exchange held until its answer",
		slog.String("request_id", c.x.ID()))
}

// closeHook calls onClose when the body is closed, before closing it.
type closeHook struct {
	io.ReadCloser
	onClose func()
}

func (b closeHook) Close() error {
	b.onClose()
	return b.ReadCloser.Close()
}

// heldOn holds c when its stream, err, was cut off before its background
// response was done (the response goes on at the provider), and reports
// whether it did.
func (c *exchangeCapture) heldOn(err error) bool {
	if !c.background || !errors.Is(err, responses.ErrNotDone) {
		return false
	}
	s, ok := c.stream.reply.(*responses.Stream)
	if !ok || s.ID() == "" {
		return false
	}
	c.holdBackground(s.ID())
	return true
}

// backgroundGet is a GET /v1/responses/{id} of a background response
// whose capture this process holds for the caller.
type backgroundGet struct {
	p   *Proxy
	key pendingKey
}

// backgroundGetOf returns the backgroundGet of r, a passthrough request
// of tenant's user, or nil: r is no GET of a response held for them.
func (p *Proxy) backgroundGetOf(r *http.Request, tenant, user string) *backgroundGet {
	if r.Method != http.MethodGet || user == "" {
		return nil
	}
	id, ok := strings.CutPrefix(r.URL.Path, responsesPath+"/")
	if !ok || id == "" || strings.Contains(id, "/") {
		return nil
	}
	k := pendingKey{tenant: tenant, user: user, id: id}
	if !p.pending.has(k) {
		return nil
	}
	return &backgroundGet{p: p, key: k}
}

// done captures the held exchange with the answer of a GET, reply (or
// err reading it), once the response is done: completed or incomplete,
// it is captured, before the client gets the reply; cancelled or
// failed (responses.ErrEnded), the held capture is dropped. A response
// not done yet, or a reply that cannot tell, keeps it held.
func (g *backgroundGet) done(ctx context.Context, reply memory.Message, usage *memory.Usage, err error) {
	if err != nil && !errors.Is(err, responses.ErrEnded) {
		return
	}
	c := g.p.pending.claim(g.key)
	if c == nil {
		return // claimed by another GET, or expired
	}
	if err != nil {
		g.p.log.LogAttrs(ctx, slog.LevelDebug, "background response ended without an answer: exchange not captured",
			slog.String("request_id", c.x.ID()), slog.String("error", err.Error()))
		return
	}
	c.capture(ctx, reply, usage)
}

// attach reads a GET's reply for the held capture: a whole JSON reply
// is read here, up to maxCaptureBytes, and the exchange captured (done)
// before any of it is written to the client; a stream (stream=true) is
// reassembled as it is relayed, and the exchange captured before the
// client gets its terminal event (as a memory-on stream's). A larger
// reply, or a stream cut off, is relayed and keeps the capture held.
func (g *backgroundGet) attach(ctx context.Context, resp *http.Response) error {
	if eventStream(resp) {
		api := g.p.responses
		t := newTee(api.stream())
		ended := false
		end := func() {
			if ended {
				return
			}
			ended = true
			reply, usage, err := t.result()
			if err == nil && reply.Failed() {
				err = responses.ErrEnded
			}
			g.done(ctx, reply, usage, err)
		}
		stop := func() {
			if !ended {
				ended = true
				t.abandon()
			}
		}
		body := &teeBody{ReadCloser: resp.Body, t: t, endLine: api.streamEnd, onEnd: end, onUndecodable: func(error) { stop() }}
		resp.Body = closeHook{ReadCloser: body, onClose: stop}
		return nil
	}
	buf, err := io.ReadAll(io.LimitReader(resp.Body, maxCaptureBytes+1))
	if err != nil {
		return fmt.Errorf("read upstream reply: %w", err)
	}
	if len(buf) > maxCaptureBytes {
		resp.Body = readCloser{Reader: io.MultiReader(bytes.NewReader(buf), resp.Body), Closer: resp.Body}
		return nil
	}
	resp.Body = readCloser{Reader: bytes.NewReader(buf), Closer: resp.Body}
	reply, usage, err := responses.ReplyFromJSON(buf)
	g.done(ctx, reply, usage, err)
	return nil
}
