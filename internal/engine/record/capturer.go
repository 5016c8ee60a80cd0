package record

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// Queue is a durable queue (the SQLite outboxes, Redis Streams): the
// capture queue of exchanges waiting to be stored, and the enrichment queue
// of stored exchanges waiting for their after-save hooks.
type Queue interface {
	// Enqueue durably appends a payload.
	Enqueue(ctx context.Context, payload []byte) error
	// Claim returns up to max deliveries for consumer: stale unacknowledged
	// entries first, then new ones, waiting up to block for any.
	Claim(ctx context.Context, consumer string, max int, staleAfter, block time.Duration) ([]memory.Delivery, error)
	// Ack removes delivered entries for good.
	Ack(ctx context.Context, ids ...string) error
	// EnqueueBatch durably appends payloads, in order, in as few calls to
	// its store as it can.
	EnqueueBatch(ctx context.Context, payloads [][]byte) error
	// Pending counts the entries not yet acknowledged.
	Pending(ctx context.Context) (int64, error)
	// Oldest returns when the oldest entry not yet acknowledged was
	// enqueued (the zero time: none). A tombstone of a conversation never
	// stored lives by it too (Capturer.QueuedSince).
	Oldest(ctx context.Context) (time.Time, error)
	// Purge deletes, claimed or not, the entries whose payload match
	// reports true, and returns how many it deleted. A purged entry is
	// never delivered again; acknowledging it is a no-op. An erasure
	// purges the user's entries (Capturer.PurgeErased).
	Purge(ctx context.Context, match func(payload []byte) bool) (int, error)
}

// SharedQueue is a capture queue several gateways share (redis.Queue, or
// sqlite.Outbox when processes share the SQLite file) that knows, per
// conversation, whether it holds turns of it, so that every gateway's
// Capturer sends a conversation's turn after the ones queued anywhere, not
// only after its own.
type SharedQueue interface {
	// EnqueueTurn appends payload, a turn of conversation conv, and counts
	// it among conv's queued turns in the same atomic step; acknowledging
	// its entry (Queue.Ack) uncounts it in the step that removes it.
	EnqueueTurn(ctx context.Context, conv string, payload []byte) error
	// Queued reports, for each of convs, whether the queue holds turns of
	// it, in one round trip.
	Queued(ctx context.Context, convs ...string) ([]bool, error)
}

// Saver stores an exchange idempotently (by ex.ID).
type Saver interface {
	SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error)
}

// BatchSaver stores several exchanges in one transaction (a group
// commit), all or nothing. The Capturer uses it when given one
// (Options.Batches).
type BatchSaver interface {
	SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error)
}

// DeadLetterer sets aside an exchange the store refused for good. The
// Capturer and the Worker use it when given one (Options.DeadLetters,
// WorkerOptions.DeadLetters).
type DeadLetterer interface {
	DeadLetter(ctx context.Context, d memory.DeadLetter) error
}

// Rerouter places again an exchange its conversation refused
// (memory.SaveResult.Parted) in the conversation its history continues
// (implemented by Router).
type Rerouter interface {
	Reroute(ctx context.Context, ex memory.Exchange) (memory.Exchange, error)
}

// Scrubber is told that a purge (Capturer.PurgeErased, PurgeDeleted) has
// gone through both queues, so that a queue keeping copies of what it
// deleted elsewhere has them removed too: redis.Queue, whose Redis may
// keep an append-only file. Scrub never blocks; what it does runs in the
// background and never fails the purge.
type Scrubber interface {
	Scrub()
}

// Redactor removes secrets from a message's Content and Raw, reporting how
// many it replaced. *redact.Redactor implements it.
type Redactor interface {
	Message(m memory.Message) (memory.Message, int, error)
}

// Options tunes a Capturer. Zero fields take the defaults noted.
type Options struct {
	// Enrich is the queue stored exchanges go to for their after-save hooks
	// (fact extraction, summaries, indexing), drained by engine/enrich's
	// Enricher. Nil: none (hooks, if any, run inside the Saver).
	Enrich Queue
	// Batches stores a lane's exchanges in one transaction; nil: one
	// transaction per exchange.
	Batches BatchSaver
	// DeadLetters keeps the exchanges the store refuses for good; nil:
	// they are dropped (counted and logged).
	DeadLetters DeadLetterer
	// Adopter keeps a full-history chat's first turn in the chat's
	// conversation (see Adopter); nil: it stays where it was stored.
	Adopter Adopter
	// Router stores an exchange of a derived conversation that its
	// conversation refused (another chat that opened alike got there
	// first: memory.Exchange.BranchSeed) in the branch its history
	// continues (Router.Reroute); nil: such an exchange is stored where it
	// is, as an edit.
	Router Rerouter
	// Stamps reads the Stamps of a conversation's live messages, to check
	// the part of a resent history a cut leaves out (memory.Exchange.Resent)
	// against what the conversation stores there; nil: no check (a
	// change there goes unseen, and the messages after it are stored
	// without a Stamp).
	Stamps StampReader
	// Chats serializes the storing of a full-history chat's first turn
	// and of its continuation with the Worker's and other processes' (see
	// ChatLocks): the process's one, shared with its Worker, over the
	// store's ChatLocker. Nil: the Capturer's own, within this process
	// only.
	Chats *ChatLocks
	// Shared is the capture queue given to New when several gateways may
	// share it (redis.Queue, sqlite.Outbox): a conversation with turns
	// queued by any of them then has its next turns queued behind them,
	// wherever they are captured. Nil: the Capturer knows only of the turns
	// it queued itself (enough when one process owns the queue).
	Shared SharedQueue
	// Scrubber is told after every purge that went through, whatever it removed (see
	// Scrubber); nil: none.
	Scrubber Scrubber
	// Ledger keeps the erasures' and deletions' queue purges not known to
	// be done in the store (PurgeLedger; the store's erasures record
	// theirs with their tombstones), so that one left pending when the
	// process stops is retried by the next process (or this one's next
	// sweep); nil: they live in this process's memory only, bounded.
	Ledger PurgeLedger
	// Held keeps the exchanges of background responses until a GET on
	// any process returns them done (Capturer.Hold); nil: Hold fails
	// with ErrNoHeldStore, and the caller holds them itself.
	Held HeldStore
	// PurgeSweep is how often the purges the Ledger lists are retried
	// (also once at start, and as soon as an attempt fails; default 1m).
	PurgeSweep time.Duration
	// Lanes is how many conversations are stored at once (default 4). A
	// conversation always goes to the same lane, so its turns are stored in
	// the order they were captured.
	Lanes int
	// Batch is the most exchanges one lane stores in one transaction
	// (default 64).
	Batch int
	// Buffer is the capacity of the lanes' hand-off channels together
	// (default 4096). When a lane is full, Capture waits for room for up to
	// FullWait (default 30s); only past it is an exchange dropped, counted
	// and logged.
	Buffer   int
	FullWait time.Duration
	// SaveWait bounds how long Capture waits for its exchange to be durable
	// (stored, or in the capture queue) before it returns anyway (default
	// 10s). The exchange is still stored after that; only a crash in between
	// would lose it.
	SaveWait time.Duration
	// OpTimeout bounds one store or queue call (default 5s).
	OpTimeout time.Duration
	// PurgeWait is how long an erasure's or a deletion's purge of the
	// queues may go without a sign that they answer before the call
	// returns with the purge pending, retried in the background
	// (PurgeErased; default 2s).
	PurgeWait time.Duration
	// RetryBase is the first delay between retries of a failed save when
	// there is no capture queue to hand it to; it doubles up to RetryMax
	// (defaults 100ms and 30s). The first retry is immediate.
	RetryBase, RetryMax time.Duration
	// RetryFor bounds how long an exchange is retried in place, counted
	// from its capture, when it can be neither stored nor queued (no
	// capture queue — PostgreSQL without Redis — or the queue failing
	// too): past it, the exchange is set aside as a dead letter (dropped
	// when the dead letter cannot be written either), counted and logged,
	// so that a save that keeps failing holds its lane and its chat's
	// locks no longer (default 2m). A chat turn whose locks another store
	// holds keeps waiting for them past it, up to LockWaitFor (see
	// expired).
	RetryFor time.Duration
	// LockWaitFor bounds how long, counted from its capture, a chat turn
	// whose chat's locks another store holds keeps waiting for them in
	// place past RetryFor instead of becoming a dead letter (a dead
	// letter is never stored later, and the turn was answered): default
	// and at most DefaultLockWaitFor, a day.
	LockWaitFor time.Duration
	// MaxAttempts is how many times an exchange failing with an error that
	// is neither invalid input nor an unreachable store is tried before it is
	// set aside as a dead letter (default 8: about 13s of retries at the
	// default backoff).
	MaxAttempts int
}

func (o Options) withDefaults() Options {
	if o.Lanes <= 0 {
		o.Lanes = 4
	}
	if o.Batch <= 0 {
		o.Batch = 64
	}
	if o.Buffer <= 0 {
		o.Buffer = 4096
	}
	if o.FullWait <= 0 {
		o.FullWait = 30 * time.Second
	}
	if o.SaveWait <= 0 {
		o.SaveWait = 10 * time.Second
	}
	if o.OpTimeout <= 0 {
		o.OpTimeout = 5 * time.Second
	}
	if o.PurgeWait <= 0 {
		o.PurgeWait = 2 * time.Second
	}
	if o.PurgeSweep <= 0 {
		o.PurgeSweep = time.Minute
	}
	if o.RetryBase <= 0 {
		o.RetryBase = 100 * time.Millisecond
	}
	if o.RetryMax < o.RetryBase {
		o.RetryMax = max(30*time.Second, o.RetryBase)
	}
	if o.RetryFor <= 0 {
		o.RetryFor = 2 * time.Minute
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 8
	}
	if o.LockWaitFor <= 0 || o.LockWaitFor > DefaultLockWaitFor {
		o.LockWaitFor = DefaultLockWaitFor
	}
	return o
}

// DefaultLockWaitFor is Options.LockWaitFor's default and bound: a day,
// the bound of a turn's retries in place (config.MaxRetryFor), so that a
// turn received before its conversation's deletion is stored or given up
// within a day of it, well within the seven days the tombstone of a
// conversation never stored is kept (memory.UnstoredTombstoneLife): a
// turn stored after its tombstone went would bring the deleted
// conversation back.
const DefaultLockWaitFor = 24 * time.Hour

// Capturer stores exchanges in their conversations on the request path and
// hands them to enrichment off it. Capture mints the exchange's key,
// sanitizes and redacts it, and stores it through its conversation's lane,
// which groups concurrent exchanges into one transaction; it returns once
// the exchange is stored or, when the store fails, durably in the capture
// queue. Wait lets the next request of a conversation wait for the
// conversation's pending turns. A turn that the store refuses for good is
// set aside as a dead letter and never holds up the others. It is safe for
// concurrent use.
type Capturer struct {
	queue    Queue // nil: no fallback; failed saves are retried in place
	saver    Saver
	batch    BatchSaver   // opts.Batches; nil: one transaction per exchange
	dead     DeadLetterer // opts.DeadLetters; nil: refused exchanges are dropped
	adopter  Adopter      // opts.Adopter; nil: a chat's first turn stays where it was stored
	chats    *ChatLocks   // opts.Chats, else the Capturer's own
	router   Rerouter     // opts.Router; nil: a refused exchange is stored where it is
	shared   SharedQueue  // opts.Shared; nil: only this Capturer's queued turns are known
	enrich   Queue        // nil: no enrichment queue
	redactor Redactor     // nil: no redaction
	stamps   StampReader  // nil: no check of what a cut leaves out
	logger   *slog.Logger
	opts     Options
	metrics  *capturerMetrics
	seed     maphash.Seed

	closeMu sync.RWMutex // guards closed against the close of lanes
	closed  bool
	lanes   []chan *job
	running sync.WaitGroup // the lanes
	watcher sync.WaitGroup // watchQueued

	convMu sync.Mutex
	convs  map[memory.Identity]*convState
	// backlog: the capture queue held entries when the Capturer started
	// (left by a process that stopped before its worker stored them). Any
	// conversation may have turns there, so until the queue has drained
	// every conversation's turns follow them there, keeping their order.
	backlog atomic.Bool
	// queuings counts the turns sent to the capture queue (under convMu),
	// so that a drained queue seen before one of them does not release it.
	queuings int64
	// askAfter: a failed SharedQueue check stops the next ones until this
	// time (unix nanoseconds), so that a queue that hangs delays at most
	// one capture a second.
	askAfter atomic.Int64

	retrying atomic.Int64
	// hungAt is when a save last ran out of OpTimeout (unix nanoseconds;
	// zero: never): see late.
	hungAt atomic.Int64
	// enrichHungAt is when an enrichment enqueue last ran out of OpTimeout
	// (unix nanoseconds; zero: never): see enqueueEnrichment.
	enrichHungAt atomic.Int64
	// ledger lists the erasures' and deletions' purges of the queues not
	// done (Options.Ledger, else mem), retried by retryPurges under
	// watcher; purges is what the Capturer knows of them beside it.
	ledger PurgeLedger
	mem    *memLedger // the ledger without Options.Ledger; nil with it
	purges *purgeState
	ctx    context.Context // cancelled when Close gives up
	cancel context.CancelFunc
}

// job is one captured exchange on its way to the store.
type job struct {
	ex memory.Exchange
	// id is ex's identity when it was captured: its lane and its turn in
	// flight (Wait). A refused exchange moves to another conversation
	// (reroute); id stays.
	id       memory.Identity
	payload  []byte // ex encoded, once the capture queue or a dead letter needs it
	start    time.Time
	attempts int
	reroutes int // times ex was refused and placed again
	// checked is the take of its chat's locks (chatHold.takes) ex's
	// adoption and check ran under (lockAndCheck); zero: none yet.
	checked int
	// lockLost counts the saves the store refused for a lost chat lock
	// (memory.ErrLockLost): the first is tried again at once, the next
	// ones later, as failed saves.
	lockLost int
	// lockHeld: ex waited for its chat's lock past RetryFor, reported
	// (expired).
	lockHeld bool
	done     chan struct{} // closed once ex is durable or given up
	// outcome is what became of ex, set before done is closed.
	outcome Outcome
}

// newJob returns the job of ex, captured at start.
func newJob(ex memory.Exchange, start time.Time) *job {
	return &job{ex: ex, id: ex.Identity, start: start, done: make(chan struct{})}
}

// convState is what the Capturer tracks of a conversation with turns in
// flight.
type convState struct {
	inflight int
	idle     chan struct{} // closed when inflight drops to 0
	// queued: some of its turns went to the capture queue, so the later ones
	// follow them there until the queue has drained, keeping their order.
	queued bool
}

// New returns a running Capturer. q, the capture queue turns go to when
// the store fails, may be nil (failed saves are then retried in place);
// redactor may be nil to store text as is; logger may be nil. With
// opts.Batches, concurrent exchanges share transactions; with
// opts.DeadLetters, exchanges the store refuses are set aside there; with
// opts.Adopter, a full-history chat's first turn joins the chat's
// conversation. Call Close to flush it.
func New(q Queue, saver Saver, redactor Redactor, logger *slog.Logger, opts Options) *Capturer {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	c := &Capturer{
		queue:    q,
		saver:    saver,
		enrich:   opts.Enrich,
		redactor: redactor,
		logger:   logger,
		opts:     opts,
		metrics:  newCapturerMetrics(),
		seed:     maphash.MakeSeed(),
		convs:    map[memory.Identity]*convState{},
		purges:   newPurgeState(),
		ctx:      ctx,
		cancel:   cancel,
	}
	c.batch, c.dead, c.adopter, c.router, c.stamps = opts.Batches, opts.DeadLetters, opts.Adopter, opts.Router, opts.Stamps
	if c.chats = opts.Chats; c.chats == nil {
		c.chats = NewChatLocks(nil)
	}
	if q != nil {
		c.shared = opts.Shared
	}
	c.metrics.retryDepth = func() float64 { return float64(c.retrying.Load()) }
	c.metrics.inflight = c.inflight
	per := max(1, opts.Buffer/opts.Lanes)
	for range opts.Lanes {
		ch := make(chan *job, per)
		c.lanes = append(c.lanes, ch)
		c.running.Go(func() { c.runLane(ch) })
	}
	if q != nil {
		c.backlog.Store(c.queueHolds())
		c.watcher.Go(c.watchQueued)
	}
	if c.ledger = opts.Ledger; c.ledger == nil {
		c.mem = newMemLedger(c.gaveUp)
		c.ledger = c.mem
	}
	c.watcher.Go(c.retryPurges)
	return c
}

// queueHolds reports whether the capture queue holds entries; a queue
// that does not answer counts as empty (its turns wait for it otherwise).
func (c *Capturer) queueHolds() bool {
	ctx, cancel := context.WithTimeout(c.ctx, c.opts.OpTimeout)
	defer cancel()
	n, err := c.queue.Pending(ctx)
	if err != nil {
		c.logger.Warn("capture cannot count the capture queue at start; storing directly", "err", err)
		return false
	}
	return n > 0
}

// Capture stores an exchange and returns once it is durable: saved in its
// conversation, or, when the store fails, in the capture queue. It waits at
// most Options.SaveWait (and not past ctx) for that; the exchange is stored
// anyway. It reports whether the exchange was settled when it returned:
// durable (stored, found stored or queued) or discarded for its user's
// erasure; false when it was not yet (a crash then loses it), or was
// dropped or set aside as a dead letter. Capture mints the exchange's ID (a client's request id, if the
// caller put it in ID, moves to RequestID: it never decides what is stored;
// an exchange carrying a RequestID and an ID minted before keeps that ID:
// withExchangeID),
// stamps At when zero, sanitizes and redacts the text. It stores ex's
// history as its caller cut it (memory.CutRequest: ex.Prior and Skipped),
// counting what the cut left unstored, after it checked what the cut left
// out against the conversation (ex.Resent, checkResent). It never fails the
// caller: an exchange that cannot be stored is dropped or set aside, counted
// and logged.
func (c *Capturer) Capture(ctx context.Context, ex memory.Exchange) bool {
	start := time.Now()
	ex = withExchangeID(ex)
	if ex.At.IsZero() {
		ex.At = start.UTC()
	}
	c.countCut(ex)
	ex = c.checkResent(ctx, ex)
	ex.Resent = memory.Resent{} // the request's messages are not kept past here
	ex, err := c.prepare(ex)
	if err != nil {
		c.metrics.failures.WithLabelValues("encode").Inc()
		c.drop(ctx, ex, "cannot encode: "+err.Error())
		return false
	}
	j := newJob(ex, start)
	if !c.submit(ctx, j) {
		return false
	}
	t := time.NewTimer(c.opts.SaveWait)
	defer t.Stop()
	select {
	case <-j.done:
		return j.outcome != Failed
	case <-t.C:
		c.metrics.failures.WithLabelValues("save_wait").Inc()
		c.logger.WarnContext(ctx, "capture still storing an exchange; not waiting longer", "exchange", ex.ID, "request_id", ex.RequestID)
	case <-ctx.Done():
	}
	return false
}

// submit hands j to its conversation's lane, waiting up to FullWait for
// room. It reports false (and drops j) when the Capturer is closed or the
// lane stayed full.
func (c *Capturer) submit(ctx context.Context, j *job) bool {
	c.closeMu.RLock()
	defer c.closeMu.RUnlock()
	if c.closed {
		c.drop(ctx, j.ex, "capturer closed")
		return false
	}
	lane := c.lanes[maphash.Comparable(c.seed, j.id)%uint64(len(c.lanes))]
	c.begin(j.id)
	select {
	case lane <- j:
		c.metrics.captured.Inc()
		return true
	default:
	}
	c.metrics.failures.WithLabelValues("buffer_full").Inc()
	t := time.NewTimer(c.opts.FullWait)
	defer t.Stop()
	select {
	case lane <- j:
		c.metrics.captured.Inc()
		return true
	case <-t.C:
		c.end(j.id)
		c.drop(ctx, j.ex, "capture buffer full")
		return false
	}
}

// Wait returns once no turn of the conversation is being stored by this
// Capturer (at once when none is), or with ctx's error when ctx ends first.
// A request calls it before it reads the conversation, so that it sees the
// turn answered just before it. waited reports that a turn was being
// stored when it was called: what was read before may be older than it.
func (c *Capturer) Wait(ctx context.Context, id memory.Identity) (waited bool, err error) {
	c.convMu.Lock()
	var idle chan struct{}
	if st := c.convs[id]; st != nil && st.inflight > 0 {
		idle = st.idle
	}
	c.convMu.Unlock()
	if idle == nil {
		return false, nil
	}
	c.metrics.waits.Inc()
	select {
	case <-idle:
		return true, nil
	case <-ctx.Done():
		return true, fmt.Errorf("wait for pending capture: %w", ctx.Err())
	}
}

// WaitUser returns once no turn of any conversation of tenant's user is
// being stored by this Capturer (at once when none is), or with ctx's
// error when ctx ends first. A request that may continue a conversation it
// does not name yet (one found by the newest reply it resends:
// Router.Continued) calls it before that lookup, so that it finds the
// turn answered just before it, wherever that went.
func (c *Capturer) WaitUser(ctx context.Context, tenant, user string) error {
	for {
		c.convMu.Lock()
		var idle chan struct{}
		for id, st := range c.convs {
			if id.Tenant == tenant && id.User == user && st.inflight > 0 {
				idle = st.idle
				break
			}
		}
		c.convMu.Unlock()
		if idle == nil {
			return nil
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return fmt.Errorf("wait for the user's pending captures: %w", ctx.Err())
		}
	}
}

// begin counts a turn of id in flight.
func (c *Capturer) begin(id memory.Identity) {
	c.convMu.Lock()
	defer c.convMu.Unlock()
	st := c.convs[id]
	if st == nil {
		st = &convState{}
		c.convs[id] = st
	}
	if st.inflight == 0 {
		st.idle = make(chan struct{})
	}
	st.inflight++
}

// end counts a turn of id as no longer in flight.
func (c *Capturer) end(id memory.Identity) {
	c.convMu.Lock()
	defer c.convMu.Unlock()
	st := c.convs[id]
	if st == nil {
		return
	}
	if st.inflight--; st.inflight == 0 {
		close(st.idle)
		if !st.queued {
			delete(c.convs, id)
		}
	}
}

// inflight counts the turns in flight, for the gauge.
func (c *Capturer) inflight() float64 {
	c.convMu.Lock()
	defer c.convMu.Unlock()
	n := 0
	for _, st := range c.convs {
		n += st.inflight
	}
	return float64(n)
}

// drop counts and logs an exchange that will not be stored.
func (c *Capturer) drop(ctx context.Context, ex memory.Exchange, reason string) {
	c.metrics.dropped.Inc()
	c.logger.ErrorContext(ctx, "capture dropped an exchange", "reason", reason,
		"exchange", ex.ID, "request_id", ex.RequestID, "tenant", ex.Tenant, "conversation", ex.Conversation)
}

// countCut counts an exchange whose history or turn its request's owner
// cut (memory.CutRequest; ex.Skipped and ex.TurnSkipped messages left
// unstored). The Capturer never cuts: what it stores is what the owner
// reported.
func (c *Capturer) countCut(ex memory.Exchange) {
	if n := ex.Skipped + ex.TurnSkipped; n > 0 {
		c.metrics.cut.Inc()
		c.metrics.cutMessages.Add(float64(n))
	}
}

// prepare sanitizes and redacts an exchange. It is encoded only when the
// capture queue or a dead letter needs it (see job.encoded): a turn the
// store takes at once is encoded once, for the enrichment queue.
func (c *Capturer) prepare(ex memory.Exchange) (memory.Exchange, error) {
	ex, n := SanitizeExchange(ex)
	if n > 0 {
		c.metrics.sanitized.Add(float64(n))
	}
	if c.redactor != nil {
		var err error
		if ex, err = c.redactExchange(ex); err != nil {
			return ex, err
		}
	}
	return ex, nil
}

// encoded returns j's exchange encoded for the capture queue and dead
// letters, encoding it on first use. A job is handled by one lane at a
// time.
func (j *job) encoded() ([]byte, error) {
	if j.payload == nil {
		b, err := json.Marshal(j.ex)
		if err != nil {
			return nil, fmt.Errorf("encode exchange: %w", err)
		}
		j.payload = b
	}
	return j.payload, nil
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
	if ex.Partial != nil {
		partial, err := red([]memory.Message{*ex.Partial})
		if err != nil {
			return ex, fmt.Errorf("redact partial reply: %w", err)
		}
		ex.Partial = &partial[0]
	}
	if total > 0 {
		c.metrics.redacted.Add(float64(total))
	}
	return ex, nil
}

// Close stops accepting exchanges and waits until everything captured so
// far is stored or in the capture queue. If ctx ends first, it abandons what
// is left (counting and logging each exchange) and returns an error
// wrapping ctx.Err(). The erasures' purges the queues have not taken
// yet (PurgeErased) stay in the store (Options.Ledger) for the next
// process; without one they are given up, logged and counted: their
// entries are refused when processed. Close is idempotent.
func (c *Capturer) Close(ctx context.Context) error {
	c.closeMu.Lock()
	if !c.closed {
		c.closed = true
		for _, ch := range c.lanes {
			close(ch)
		}
	}
	c.closeMu.Unlock()
	done := make(chan struct{})
	go func() {
		c.running.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		pending := c.inflight()
		c.cancel() // the lanes give up what they still hold
		<-done
		err = fmt.Errorf("close capture with %.0f exchanges pending: %w", pending, ctx.Err())
	}
	c.cancel()
	c.watcher.Wait()
	c.giveUpPurges()
	return err
}

// NewExchangeID returns a new random exchange id ("ex-" and 32 hex digits):
// the key of an exchange and of its messages, unique within any tenant,
// user and conversation.
func NewExchangeID() string { return memory.NewExchangeID() }

// withExchangeID gives ex its exchange id: a client's request id in ID
// moves to RequestID and a new id is minted; an exchange that carries
// both already — a background exchange, its id minted when it was first
// held (Hold) — keeps its id, so that storing it again (claimed again, or
// captured from a copy held in the process too) finds it stored.
func withExchangeID(ex memory.Exchange) memory.Exchange {
	if ex.RequestID != "" && memory.IsExchangeID(ex.ID) {
		return ex
	}
	if ex.RequestID == "" {
		ex.RequestID = ex.ID
	}
	ex.ID = NewExchangeID()
	return ex
}

// ConvKey names a conversation in a SharedQueue: "q1:" and the hex SHA-256
// of a domain tag and its identity as a JSON array (unambiguous whatever
// its parts hold). The queue keeps the name beside its entries, and in the
// bytes of deleted stream entries after an erasure purged them: a digest,
// not the ids, so the queue holds no user id in the clear (a user id is
// often an email).
func ConvKey(id memory.Identity) string {
	h := sha256.Sum256([]byte("memgate/queued-conversation/v1\n" + legacyConvKey(id)))
	return "q1:" + hex.EncodeToString(h[:])
}

// legacyConvKey is the name gateways of before ConvKey's digest gave a
// conversation: its identity as a JSON array. The Capturer asks for it
// too, so that turns such a gateway queued during a rolling upgrade
// still hold a conversation's next turns behind them.
func legacyConvKey(id memory.Identity) string {
	b, _ := json.Marshal([3]string{id.Tenant, id.User, id.Conversation})
	return string(b)
}
