package redis

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/memgate/memgate/internal/pace"
)

// Redis's append-only file after an erasure.
//
// Purge deletes an erased user's entries and payload keys from Redis's
// memory, but a Redis run with `appendonly yes` keeps every write it
// received, the payloads' SETs included, in its append-only file until
// the file is rewritten, which Redis does by itself only once the file has
// grown a lot (auto-aof-rewrite-min-size, 64 MB by default). And the text
// of every exchange passes through the enrichment stream, so the file
// holds the user's exchanges that were processed long ago as well as those
// the purge found. So after a purge, whatever it removed, the Queue asks
// Redis to rewrite the file (BGREWRITEAOF) when INFO persistence says the
// file is on: the rewritten file holds what Redis holds, nothing of the
// erased user. Rewrites run in the background, coalesced and spaced out as
// PostgreSQL's post-erasure VACUUM is (see aofRewriter). A managed Redis
// that refuses INFO or BGREWRITEAOF is logged (no contents) and counted;
// the erasure never fails for it.
//
// A request outlives the process that made it: Scrub marks it in Redis
// (aofDue) before the loop takes it, the mark is cleared only once a
// rewrite started after it (or Redis keeps no file), and a queue that
// finds a mark when it starts asks for the rewrite. A gateway killed
// within the interval after an erasure, with its request waiting, leaves
// it to the next process on the same Redis.

// aofInterval is the least time between the starts of two rewrites one
// process asks for.
const aofInterval = time.Minute

// aofTimeout bounds one request (INFO, then BGREWRITEAOF); the rewrite
// itself runs in Redis.
const aofTimeout = 10 * time.Second

// Outcomes of one request to rewrite, the metric's result label.
const (
	aofStarted = "started" // Redis started (or scheduled) a rewrite
	aofOff     = "aof_off" // no append-only file: nothing to do
	aofBusy    = "busy"    // a rewrite was already running: asked again an interval later
	aofRefused = "refused" // Redis refused INFO or BGREWRITEAOF (a managed Redis)
	aofFailed  = "failed"  // Redis did not answer
)

// aofRewriter asks Redis to rewrite its append-only file in the
// background, one request at a time (a pace.Loop): requests that arrive
// while one runs are served by a single next one, and requests start at
// least aofInterval apart, so erasures in a loop ask Redis for at most one
// rewrite an interval. A request made while a rewrite is already running
// (it may have started before the purge) is made again an interval later.
type aofRewriter struct {
	// run makes one request and says how it went; a field so a test can
	// count requests.
	run      func(ctx context.Context) (string, error)
	logger   *slog.Logger
	requests *prometheus.CounterVec
	loop     *pace.Loop
	refused  bool // a refusal was logged at warn already; the loop's alone
	// due is the request's mark in Redis; nil: requests are not marked.
	due *aofDue
}

// aofDue is the mark in Redis of a rewrite requested and not yet started:
// a counter at key, raised by each request, deleted by a rewrite started
// after the raise it read.
type aofDue struct {
	rdb redis.UniversalClient
	key string
}

// aofDueTimeout bounds one read or write of the mark.
const aofDueTimeout = 2 * time.Second

// clearDueScript deletes the mark if it still holds the value a rewrite
// read before starting: a request marked since then keeps it.
var clearDueScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0
`)

// raise marks a request.
func (d *aofDue) raise() error {
	ctx, cancel := context.WithTimeout(context.Background(), aofDueTimeout)
	defer cancel()
	return d.rdb.Incr(ctx, d.key).Err()
}

// read returns the mark, "" when there is none.
func (d *aofDue) read() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), aofDueTimeout)
	defer cancel()
	v, err := d.rdb.Get(ctx, d.key).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return v, err
}

// clear deletes the mark if it is still v.
func (d *aofDue) clear(v string) error {
	ctx, cancel := context.WithTimeout(context.Background(), aofDueTimeout)
	defer cancel()
	return clearDueScript.Run(ctx, d.rdb, []string{d.key}, v).Err()
}

// newAOFRewriter returns the rewriter of rdb, marking its requests at
// dueKey; a request a process before it marked and did not serve is asked
// for at once.
func newAOFRewriter(rdb redis.UniversalClient, dueKey string, logger *slog.Logger) *aofRewriter {
	r := startAOFRewriter(func(ctx context.Context) (string, error) { return rewriteAOF(ctx, rdb) }, nil, logger)
	r.due = &aofDue{rdb: rdb, key: dueKey}
	if v, err := r.due.read(); err != nil {
		r.logger.Warn("redis: could not read whether an append-only file rewrite is due", "error", err)
	} else if v != "" {
		r.logger.Info("redis: an append-only file rewrite asked for by an earlier process is due")
		r.loop.Request()
	}
	return r
}

// startAOFRewriter returns a rewriter with its run and its loop's wait
// (nil: pace.Sleep).
func startAOFRewriter(run func(context.Context) (string, error), wait func(context.Context, time.Duration), logger *slog.Logger) *aofRewriter {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &aofRewriter{run: run, logger: logger,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memgate_redis_aof_rewrites_total",
			Help: "Requests for Redis to rewrite its append-only file after a purge, by result: started, aof_off, busy (asked again later), refused (a managed Redis), failed.",
		}, []string{"result"})}
	r.loop = pace.New(aofInterval, r.once, wait)
	return r
}

// rewriteAOF asks Redis to rewrite its append-only file if it keeps one.
func rewriteAOF(ctx context.Context, rdb redis.UniversalClient) (string, error) {
	info, err := rdb.Info(ctx, "persistence").Result()
	if err != nil {
		return refusedOrFailed(err), err
	}
	on := false
	for line := range strings.Lines(info) {
		if k, v, _ := strings.Cut(strings.TrimSpace(line), ":"); k == "aof_enabled" {
			on = v == "1"
		}
	}
	if !on {
		return aofOff, nil
	}
	err = rdb.BgRewriteAOF(ctx).Err()
	switch {
	case err == nil:
		return aofStarted, nil
	case strings.Contains(err.Error(), "already in progress"):
		return aofBusy, err
	}
	return refusedOrFailed(err), err
}

// refusedOrFailed tells an error Redis answered from a failure to reach it.
func refusedOrFailed(err error) string {
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return aofRefused
	}
	return aofFailed
}

// request asks for a rewrite after the current request (if any), marking
// it in Redis first (bounded by aofDueTimeout; a mark that fails is
// logged, and the request is made all the same).
func (r *aofRewriter) request() {
	if r.due != nil {
		if err := r.due.raise(); err != nil {
			r.logger.Warn("redis: could not mark an append-only file rewrite as due; a process killed before making it leaves it undone", "error", err)
		}
	}
	r.loop.Request()
}

// stop ends the loop, waiting for a request in hand. A request it leaves
// unserved (a purge's, waiting out the interval since the last one) is
// made on the way out, bounded by aofTimeout: a gateway stopped within a
// minute of an erasure (a rolling deploy) would leave the erased text in
// the file until Redis rewrote it by itself, which a small dataset may
// never make it do.
func (r *aofRewriter) stop() {
	if r.loop.Stop() {
		r.once(context.Background())
	}
}

// once makes one request, counts and logs how it went. The request runs
// to its own bound (aofTimeout), not cut short by the loop's stop, which
// waits for it: a rewrite asked for is not dropped halfway.
func (r *aofRewriter) once(context.Context) {
	ctx, cancel := context.WithTimeout(context.Background(), aofTimeout)
	defer cancel()
	var due string
	if r.due != nil {
		due, _ = r.due.read() // unread: the mark stays, and is served again by the next process
	}
	result, err := r.run(ctx)
	r.requests.WithLabelValues(result).Inc()
	if due != "" && (result == aofStarted || result == aofOff) {
		if err := r.due.clear(due); err != nil {
			r.logger.Debug("redis: could not clear the append-only file rewrite's mark", "error", err)
		}
	}
	switch result {
	case aofStarted:
		r.logger.Info("redis: append-only file rewrite started after a purge")
	case aofBusy:
		r.logger.Debug("redis: an append-only file rewrite was running at the purge; asking again later")
		r.loop.Request()
	case aofRefused:
		level := slog.LevelWarn
		if r.refused {
			level = slog.LevelDebug
		}
		r.refused = true
		r.logger.Log(ctx, level, "redis: refused to rewrite its append-only file after a purge (a managed Redis?); purged text stays in that file until Redis rewrites it",
			"error", err)
	case aofFailed:
		r.logger.Warn("redis: could not ask for an append-only file rewrite after a purge", "error", err)
	}
}
