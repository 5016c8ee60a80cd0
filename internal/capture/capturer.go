package capture

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// Queue is the durable capture queue (the SQLite outbox, Redis Streams).
type Queue interface {
	// Enqueue durably appends a payload.
	Enqueue(ctx context.Context, payload []byte) error
	// Claim returns up to max deliveries for consumer: stale unacknowledged
	// entries first, then new ones, waiting up to block for any.
	Claim(ctx context.Context, consumer string, max int, staleAfter, block time.Duration) ([]memory.Delivery, error)
	// Ack removes delivered entries for good.
	Ack(ctx context.Context, ids ...string) error
}

// Saver stores an exchange idempotently (by ex.ID).
type Saver interface {
	SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error)
}

// Redactor removes secrets from a message's Content and Raw, reporting how
// many it replaced. *redact.Redactor implements it.
type Redactor interface {
	Message(m memory.Message) (memory.Message, int, error)
}

// Options tunes a Capturer. Zero fields take the defaults noted.
type Options struct {
	// Buffer is the capacity of the hand-off channel between requests and the
	// background goroutine (default 4096). When it is full, Capture waits for
	// room for up to FullWait: the proxy calls Capture after the client has
	// its whole reply, so the wait slows the handler, not the client.
	Buffer int
	// FullWait bounds that wait (default 30s); only past it is an exchange
	// dropped, counted and logged.
	FullWait time.Duration
	// RetryBuffer bounds the exchanges waiting for the queue or the store to
	// come back (default 1024). When it is full the background goroutine
	// waits, and Buffer absorbs new captures.
	RetryBuffer int
	// OpTimeout bounds one Enqueue or SaveExchange call (default 5s).
	OpTimeout time.Duration
	// RetryBase is the first retry delay; it doubles up to RetryMax
	// (defaults 100ms and 30s).
	RetryBase, RetryMax time.Duration
}

func (o Options) withDefaults() Options {
	if o.Buffer <= 0 {
		o.Buffer = 4096
	}
	if o.FullWait <= 0 {
		o.FullWait = 30 * time.Second
	}
	if o.RetryBuffer <= 0 {
		o.RetryBuffer = 1024
	}
	if o.OpTimeout <= 0 {
		o.OpTimeout = 5 * time.Second
	}
	if o.RetryBase <= 0 {
		o.RetryBase = 100 * time.Millisecond
	}
	if o.RetryMax < o.RetryBase {
		o.RetryMax = max(30*time.Second, o.RetryBase)
	}
	return o
}

// Capturer persists exchanges in the background: it redacts them, enqueues
// them on the durable queue, falls back to saving directly when the queue
// fails, and keeps retrying what neither accepted. It is safe for concurrent
// use.
type Capturer struct {
	queue    Queue // nil: save directly
	saver    Saver
	redactor Redactor // nil: no redaction
	logger   *slog.Logger
	opts     Options
	metrics  *capturerMetrics

	mu     sync.RWMutex // guards closed against the close of in
	closed bool
	in     chan memory.Exchange

	retry     chan []byte // encoded, redacted exchanges waiting to be retried
	retryOnce sync.Once   // closes retry
	retrying  atomic.Int64
	ctx       context.Context // cancelled when Close gives up
	cancel    context.CancelFunc
	pumpDone  chan struct{}
	done      chan struct{}
}

// New returns a running Capturer. q may be nil, in which case exchanges are
// saved directly with saver; redactor may be nil to store text as is; logger
// may be nil. Call Close to flush it.
func New(q Queue, saver Saver, redactor Redactor, logger *slog.Logger, opts Options) *Capturer {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	c := &Capturer{
		queue:    q,
		saver:    saver,
		redactor: redactor,
		logger:   logger,
		opts:     opts,
		metrics:  newCapturerMetrics(),
		in:       make(chan memory.Exchange, opts.Buffer),
		retry:    make(chan []byte, opts.RetryBuffer),
		ctx:      ctx,
		cancel:   cancel,
		pumpDone: make(chan struct{}),
		done:     make(chan struct{}),
	}
	c.metrics.retryDepth = func() float64 { return float64(c.retrying.Load()) }
	go c.pump()
	go c.retrier()
	return c
}

// Capture hands an exchange over for persistence and returns at once; it
// never waits on the queue or the store. An exchange without an ID gets a
// random one, which then keys its messages. With the hand-off buffer full it
// waits up to Options.FullWait for room. Capture after Close, or past that
// wait, drops the exchange, counts it and logs an error.
func (c *Capturer) Capture(ctx context.Context, ex memory.Exchange) {
	if ex.ID == "" {
		ex.ID = randomID()
	}
	if ex.At.IsZero() {
		ex.At = time.Now().UTC()
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		c.drop(ctx, ex, "capturer closed")
		return
	}
	select {
	case c.in <- ex:
		c.metrics.captured.Inc()
		return
	default:
	}
	c.metrics.failures.WithLabelValues("buffer_full").Inc()
	t := time.NewTimer(c.opts.FullWait)
	defer t.Stop()
	select {
	case c.in <- ex:
		c.metrics.captured.Inc()
	case <-t.C:
		c.drop(ctx, ex, "capture buffer full")
	}
}

// drop counts and logs an exchange that will not be stored.
func (c *Capturer) drop(ctx context.Context, ex memory.Exchange, reason string) {
	c.metrics.dropped.Inc()
	c.logger.ErrorContext(ctx, "capture dropped an exchange", "reason", reason,
		"exchange", ex.ID, "tenant", ex.Tenant, "conversation", ex.Conversation)
}

// pump drains the hand-off channel: redact, encode, enqueue, else save
// directly, else hand to the retrier. While the retrier holds anything, new
// exchanges queue behind it so a conversation's turns keep their order.
func (c *Capturer) pump() {
	defer close(c.pumpDone)
	for ex := range c.in {
		payload, err := c.prepare(ex)
		if err != nil {
			c.metrics.failures.WithLabelValues("encode").Inc()
			c.logger.Error("capture cannot encode an exchange; dropped", "exchange", ex.ID, "err", err)
			c.metrics.dropped.Inc()
			continue
		}
		if c.retrying.Load() == 0 && c.deliver(ex.ID, payload) {
			continue
		}
		c.retrying.Add(1)
		select {
		case c.retry <- payload:
		case <-c.ctx.Done():
			c.retrying.Add(-1)
			c.metrics.dropped.Inc()
			c.logger.Error("capture gave up on an exchange at shutdown", "exchange", ex.ID)
		}
	}
}

// prepare redacts an exchange and encodes it as a queue payload.
func (c *Capturer) prepare(ex memory.Exchange) ([]byte, error) {
	if c.redactor != nil {
		var err error
		if ex, err = c.redactExchange(ex); err != nil {
			return nil, err
		}
	}
	payload, err := json.Marshal(ex)
	if err != nil {
		return nil, fmt.Errorf("encode exchange: %w", err)
	}
	return payload, nil
}

// redactExchange redacts every message of ex, on copies of its slices.
func (c *Capturer) redactExchange(ex memory.Exchange) (memory.Exchange, error) {
	total := 0
	red := func(msgs []memory.Message) ([]memory.Message, error) {
		if msgs == nil {
			return nil, nil
		}
		out := make([]memory.Message, len(msgs))
		for i, m := range msgs {
			r, n, err := c.redactor.Message(m)
			if err != nil {
				return nil, err
			}
			out[i] = r
			total += n
		}
		return out, nil
	}
	var err error
	if ex.Prior, err = red(ex.Prior); err != nil {
		return ex, fmt.Errorf("redact prior: %w", err)
	}
	if ex.Turn, err = red(ex.Turn); err != nil {
		return ex, fmt.Errorf("redact turn: %w", err)
	}
	reply, err := red([]memory.Message{ex.Reply})
	if err != nil {
		return ex, fmt.Errorf("redact reply: %w", err)
	}
	ex.Reply = reply[0]
	if total > 0 {
		c.metrics.redacted.Add(float64(total))
	}
	return ex, nil
}

// deliver tries once to enqueue payload, then to save it directly. It
// reports whether either succeeded.
func (c *Capturer) deliver(id string, payload []byte) bool {
	if c.queue != nil {
		ctx, cancel := context.WithTimeout(c.ctx, c.opts.OpTimeout)
		err := c.queue.Enqueue(ctx, payload)
		cancel()
		if err == nil {
			c.metrics.enqueued.Inc()
			return true
		}
		c.metrics.failures.WithLabelValues("enqueue").Inc()
		c.logger.Warn("capture queue unavailable; saving directly", "exchange", id, "err", err)
	}
	var ex memory.Exchange
	if err := json.Unmarshal(payload, &ex); err != nil {
		// Cannot happen: payload was encoded by prepare.
		c.logger.Error("capture payload does not decode", "exchange", id, "err", err)
		return false
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.OpTimeout)
	res, err := c.saver.SaveExchange(ctx, ex)
	cancel()
	if err != nil {
		if errors.Is(err, memory.ErrInvalid) {
			// The store will never accept it; retrying would block the rest.
			c.metrics.failures.WithLabelValues("invalid").Inc()
			c.metrics.dropped.Inc()
			c.logger.Error("capture rejected by the store; dropped", "exchange", id, "err", err)
			return true
		}
		c.metrics.failures.WithLabelValues("save").Inc()
		c.logger.Warn("capture store unavailable; will retry", "exchange", id, "err", err)
		return false
	}
	if c.queue != nil {
		c.metrics.direct.Inc()
	}
	c.metrics.saved.Inc()
	if res.Duplicate {
		c.metrics.duplicates.Inc()
	}
	return true
}

// retrier delivers what pump could not, one payload at a time and in order,
// backing off between attempts until each succeeds or Close gives up.
func (c *Capturer) retrier() {
	defer close(c.done)
	for payload := range c.retry {
		delay := c.opts.RetryBase
		for attempt := 1; ; attempt++ {
			id := payloadID(payload)
			if c.deliver(id, payload) {
				break
			}
			if attempt == 1 || attempt%10 == 0 {
				c.logger.Error("capture still failing; holding exchange for retry",
					"exchange", id, "attempt", attempt, "waiting", c.retrying.Load())
			}
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-c.ctx.Done():
				t.Stop()
			}
			if c.ctx.Err() != nil {
				c.metrics.dropped.Inc()
				c.logger.Error("capture gave up on an exchange at shutdown", "exchange", id)
				break
			}
			delay = min(2*delay, c.opts.RetryMax)
		}
		c.retrying.Add(-1)
	}
}

// payloadID reads the exchange id of an encoded exchange, for logs.
func payloadID(payload []byte) string {
	var v struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(payload, &v)
	return v.ID
}

// Close stops accepting exchanges and waits until everything captured so
// far is enqueued or stored. If ctx ends first, it abandons what is left
// (counting and logging each exchange) and returns an error wrapping
// ctx.Err(). Close is idempotent.
func (c *Capturer) Close(ctx context.Context) error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.in)
	}
	c.mu.Unlock()
	go func() {
		<-c.pumpDone
		c.retryOnce.Do(func() { close(c.retry) })
	}()
	select {
	case <-c.done:
		c.cancel()
		return nil
	case <-ctx.Done():
		pending := c.retrying.Load() + int64(len(c.in))
		c.cancel()
		<-c.done
		return fmt.Errorf("close capture with %d exchanges pending: %w", pending, ctx.Err())
	}
}

// randomID returns a random exchange id.
func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "cap-" + hex.EncodeToString(b[:])
}
