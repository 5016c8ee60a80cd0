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
}

// newAOFRewriter returns the rewriter of rdb.
func newAOFRewriter(rdb redis.UniversalClient, logger *slog.Logger) *aofRewriter {
	return startAOFRewriter(func(ctx context.Context) (string, error) { return rewriteAOF(ctx, rdb) }, nil, logger)
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

// request asks for a rewrite after the current request (if any); it never
// blocks.
func (r *aofRewriter) request() { r.loop.Request() }

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
	result, err := r.run(ctx)
	r.requests.WithLabelValues(result).Inc()
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
