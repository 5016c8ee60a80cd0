package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/memgate/memgate/bench/scratch"
	"github.com/memgate/memgate/eval/launch"
	"github.com/memgate/memgate/eval/score"
	"github.com/memgate/memgate/eval/standin"
	"github.com/memgate/memgate/eval/synth"
	"github.com/memgate/memgate/internal/tokens"
)

// options are the command's flags.
type options struct {
	seed     uint64
	users    int
	synth    synth.Options
	budgets  []int
	out      string
	gateway  string
	model    string
	probeIn  []string
	keep     bool
	details  string
	config   string
	saidAt   string
	deliver  string
	deadline time.Duration
	// postgresURL and redisURL, when set, run the gateway on PostgreSQL
	// (a throwaway database on that server) behind Redis instead of SQLite.
	postgresURL, redisURL string
	// locomo, when set, is a locomo10.json file measured instead of the
	// synthetic set (see locomo.go).
	locomo string
	// locomoPick are the 1-based conversations measured (empty: all).
	locomoPick []int
	// locomoClients are the clients replayed: newest, full.
	locomoClients []string
	// locomoBudget is the questions' X-Memory-Budget.
	locomoBudget int
	// questionMode is the questions' X-Memory-Mode ("read", or "on" as a
	// user asking in the chat would: the question is then stored too).
	questionMode string
	// detailsPrompts adds each question's prompt to the -details lines.
	detailsPrompts bool
	// replayPrompts, when set, is a file that gets one JSON line per
	// replayed exchange: the prompt the upstream received.
	replayPrompts string
	// sideModel is who writes summaries and extracts facts with -locomo:
	// sideStandIn (the stand-in upstream, as a side model) or sideNone (no
	// side-model key: memgate's own extractive summariser and patterns).
	sideModel string
	// pace is when a LoCoMo replay sends its next exchange: paceEnriched
	// (once the previous one is enriched) or paceSaved (once it is saved).
	pace string
	// enrichInterval, with paceEnriched, is the gateway's
	// capture.enrich_interval unless the config sets it (0: leave it).
	enrichInterval time.Duration
}

// parseFlags reads the command line; the defaults are the reported run.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	o := options{synth: synth.DefaultOptions()}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Uint64Var(&o.seed, "seed", 1, "generator seed; user i gets seed*1000+i")
	fs.IntVar(&o.users, "users", 3, "synthetic users (one long multi-session conversation each)")
	fs.IntVar(&o.synth.Sessions, "sessions", o.synth.Sessions, "sessions (conversations) per user")
	fs.IntVar(&o.synth.TurnsPerSession, "turns", o.synth.TurnsPerSession, "turns per session, both speakers (even)")
	fs.IntVar(&o.synth.PerType, "questions", o.synth.PerType, "questions of each type per user")
	budgets := fs.String("budgets", "4000,8000", "token budgets (X-Memory-Budget), comma-separated")
	fs.StringVar(&o.out, "out", "", "also write the markdown report to this file")
	fs.StringVar(&o.gateway, "gateway", "", "gateway binary to run (default: go build ./cmd/gateway into a temp dir)")
	fs.StringVar(&o.model, "model", "gpt-4o-mini", "model named in requests (tokenizer and context window)")
	probeIn := fs.String("probe-in", "last,new", "where questions are asked, comma-separated: last (the user's last session, continued), new (a fresh conversation per user)")
	fs.StringVar(&o.config, "config", "", "gateway YAML config file (default: the built-in defaults with memory.load_timeout and memory.embedding_timeout 5s)")
	fs.StringVar(&o.postgresURL, "postgres-url", "", "run the gateway on PostgreSQL + pgvector instead of SQLite: a throwaway database is created (and dropped) on this server; needs -redis-url")
	fs.StringVar(&o.redisURL, "redis-url", "", "with -postgres-url, the Redis the gateway caches in (under a unique key prefix)")
	fs.BoolVar(&o.keep, "keep", false, "keep the temp dir (gateway log, SQLite database)")
	fs.StringVar(&o.details, "details", "", "write one JSON line per judged question, method and budget to this file")
	fs.StringVar(&o.deliver, "deliver", deliverImport, "how the history reaches memgate: import (each session through POST /v1/memory/import, every message with its time), chat (turn by turn as chat completions)")
	fs.StringVar(&o.saidAt, "said-at-header", "X-Memory-Timestamp", "with -deliver chat, send each turn's time (RFC 3339) in this request header (empty: none, every turn is dated at replay time)")
	fs.DurationVar(&o.deadline, "timeout", 14*time.Minute, "give up after this long (with -locomo, 90m unless set)")
	fs.StringVar(&o.locomo, "locomo", "", "measure the LoCoMo conversations in this locomo10.json (snap-research/LoCoMo) instead of the synthetic set")
	pick := fs.String("conversations", "", "with -locomo, the conversations measured, 1-based and comma-separated (e.g. 1,2; default all)")
	clients := fs.String("client", clientNewest, "with -locomo, the clients replayed, comma-separated: newest (conversation header, newest message only), full (the whole session resent, no conversation header)")
	fs.IntVar(&o.locomoBudget, "locomo-budget", 4000, "with -locomo, the questions' X-Memory-Budget")
	fs.StringVar(&o.questionMode, "question-mode", "read", "with -locomo, the questions' X-Memory-Mode: read (nothing stored), or on (asked as a chat turn, and stored: each question is then part of the memory the next one reads)")
	fs.StringVar(&o.replayPrompts, "replay-prompts", "", "with -locomo, write the prompt of each replayed exchange to this file, one JSON line each (conversation, client, prompt)")
	fs.StringVar(&o.sideModel, "side-model", "", "who writes summaries and extracts facts: stand-in (the stand-in upstream as a side model, through the gateway's upstream key; the synthetic set's default) or none (no side-model key: the client's key is forwarded, memgate summarises extractively and extracts facts by pattern, as out of the box; the default with -locomo, whose goal is at the default config)")
	fs.StringVar(&o.pace, "pace", paceEnriched, "with -locomo, when the next exchange is sent: enriched (once the previous one is indexed, summarised and its facts extracted, as in a conversation spread over months: the run is repeatable) or saved (once it is stored: faster, but what enrichment coalesces, and so the summaries and facts, depends on timing)")
	fs.DurationVar(&o.enrichInterval, "enrich-interval", 10*time.Millisecond, "with -locomo and -pace enriched, the gateway's capture.enrich_interval unless -config sets it: each round enriches one exchange, so the interval is only a wait (0: the gateway's default, for builds without the setting)")
	fs.BoolVar(&o.detailsPrompts, "details-prompts", false, "with -locomo and -details, add the prompt the upstream received to each question's line")
	if err := fs.Parse(args[1:]); err != nil {
		return o, err
	}
	if o.locomo != "" {
		if err := parseLoCoMoFlags(&o, *pick, *clients); err != nil {
			return o, err
		}
		set := false
		fs.Visit(func(f *flag.Flag) { set = set || f.Name == "timeout" })
		if !set {
			o.deadline = loDeadline
		}
	}
	if o.sideModel == "" {
		o.sideModel = sideStandIn
		if o.locomo != "" {
			o.sideModel = sideNone
		}
	}
	if o.sideModel != sideStandIn && o.sideModel != sideNone {
		return o, fmt.Errorf("-side-model: %q is not stand-in or none", o.sideModel)
	}
	for _, f := range strings.Split(*budgets, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return o, fmt.Errorf("-budgets: %q is not a positive whole number", f)
		}
		o.budgets = append(o.budgets, n)
	}
	for _, f := range strings.Split(*probeIn, ",") {
		f = strings.TrimSpace(f)
		if f != probeNew && f != probeLast {
			return o, fmt.Errorf("-probe-in: %q is not new or last", f)
		}
		o.probeIn = append(o.probeIn, f)
	}
	if o.deliver != deliverImport && o.deliver != deliverChat {
		return o, fmt.Errorf("-deliver: %q is not import or chat", o.deliver)
	}
	if o.deliver == deliverImport {
		o.saidAt = ""
	}
	if o.users < 1 {
		return o, errors.New("-users must be at least 1")
	}
	if (o.postgresURL == "") != (o.redisURL == "") {
		return o, errors.New("-postgres-url and -redis-url go together")
	}
	return o, nil
}

// run is the whole program.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.deadline)
	defer cancel()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	started := time.Now()

	counter, err := tokens.New(nil)
	if err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	var convs []synth.Conversation
	for u := range o.users {
		c, err := synth.Generate(o.seed*1000+uint64(u+1), fmt.Sprintf("eval-u%d", u+1), o.synth)
		if err != nil {
			return err
		}
		convs = append(convs, c)
	}

	dir, err := os.MkdirTemp("", "memgate-eval-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	if o.keep {
		log.Info("keeping the temp dir", "dir", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	bin := o.gateway
	if bin == "" {
		root, err := launch.ModuleRoot()
		if err != nil {
			return err
		}
		log.Info("building the gateway")
		if bin, err = launch.Build(ctx, root, dir); err != nil {
			return err
		}
	}
	extra := evalConfig
	if o.config != "" {
		b, err := os.ReadFile(o.config)
		if err != nil {
			return fmt.Errorf("-config: %w", err)
		}
		extra = string(b)
	}

	if o.locomo != "" {
		return runLoCoMo(ctx, o, args, bin, dir, extra, counter, log, stdout, started)
	}
	res := &results{o: o, tallies: map[cell]*score.Tally{}, sideCalls: map[standin.Kind]int{}}
	system := []json.RawMessage{rawMessage("system", appSystem)}
	histories, err := measure(ctx, o, bin, dir, extra, counter, log, convs, system, res)
	if err != nil {
		return err
	}
	baselines(o, counter, convs, histories, system, res)
	res.describe(counter, o.model, convs, histories, system)
	res.elapsed = time.Since(started)
	if o.details != "" {
		if err := writeDetails(o.details, res.details); err != nil {
			return err
		}
	}
	res.command = displayCommand(args)
	report := res.markdown()
	fmt.Fprint(stdout, report)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(report), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", o.out, err)
		}
	}
	return nil
}

// How the history reaches memgate.
const (
	deliverImport = "import" // POST /v1/memory/import, one session at a time
	deliverChat   = "chat"   // one chat completion per turn
)

// Where probes are asked.
const (
	probeNew  = "new"  // a fresh conversation of the user
	probeLast = "last" // the user's last session, continued
)

// methodName labels memgate's row for probes asked where; the first place
// listed keeps the plain name.
func methodName(method, where, first string) string {
	if where == first {
		return method
	}
	if where == probeLast {
		return method + ", asked in last session"
	}
	return method + ", asked in a new conversation"
}

// evalConfig is the gateway configuration measured: the built-in defaults,
// except that memory may take up to 5s to load and a question's embedding
// up to 5s to come, so a busy machine cannot change what is measured (past
// the default 150ms and 300ms deadlines the gateway forwards without
// memory, or searches with full text alone; the report counts any probe
// that still was degraded).
const evalConfig = `memory:
  load_timeout: 5s
  embedding_timeout: 5s
`

// stack is a running gateway in front of a fresh stand-in upstream.
type stack struct {
	gw   *launch.Gateway
	up   *standin.Server
	stop func(err error) error
}

// startStack runs a fresh stand-in and a fresh gateway (in dir, on SQLite
// or, with -postgres-url, on a throwaway PostgreSQL database behind Redis).
// Its stop stops both and removes the database; given the run's error, it
// returns it with the gateway log's path added.
func startStack(ctx context.Context, o options, bin, dir, extra string, log *slog.Logger) (*stack, error) {
	up := standin.New(standin.Options{})
	upSrv := httptest.NewServer(up)
	var env []string
	cleanup := []func(){upSrv.Close}
	undo := func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}
	if o.postgresURL != "" {
		db, err := scratch.New(ctx, o.postgresURL, o.redisURL, "eval")
		if err != nil {
			undo()
			return nil, err
		}
		cleanup = append(cleanup, func() {
			if err := db.Close(context.WithoutCancel(ctx)); err != nil {
				log.Warn("remove the eval database and Redis keys", "database", db.Name, "err", err)
			}
		})
		env = []string{"GATEWAY_STORE=postgres", "GATEWAY_POSTGRES_URL=" + db.DBURL, "GATEWAY_REDIS_URL=" + db.RedisURL}
		extra += "\nstore:\n  redis_prefix: \"" + db.Prefix + "\"\n"
	}
	if o.sideModel == sideNone {
		// No upstream key: the client's own is forwarded, and there is
		// no side model to call.
		env = append(env, "GATEWAY_UPSTREAM_API_KEY=")
	}
	gw, err := launch.Start(ctx, launch.Options{Binary: bin, Dir: dir, UpstreamURL: upSrv.URL + "/v1", Config: extra, Env: env})
	if err != nil {
		undo()
		return nil, err
	}
	stop := func(err error) error {
		defer undo()
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer scancel()
		if serr := gw.Stop(sctx); serr != nil {
			log.Warn("stop gateway", "error", serr)
		}
		if err != nil {
			err = fmt.Errorf("%w (gateway log: %s; run with -keep to keep it)", err, gw.LogPath)
		}
		return err
	}
	return &stack{gw: gw, up: up, stop: stop}, nil
}

// measure runs a fresh gateway (in dir) in front of a fresh stand-in,
// replays the conversations, asks the questions, and returns the histories.
func measure(ctx context.Context, o options, bin, dir, extra string, counter *tokens.Counter, log *slog.Logger,
	convs []synth.Conversation, system []json.RawMessage, res *results) (histories [][]json.RawMessage, err error) {
	st, err := startStack(ctx, o, bin, dir, extra, log)
	if err != nil {
		return nil, err
	}
	defer func() { err = st.stop(err) }()
	gw, up := st.gw, st.up
	h := &harness{o: o, gw: gw, up: up, counter: counter, log: log}
	start := time.Now()
	histories, err = h.replayAll(ctx, convs, system)
	if err != nil {
		return nil, err
	}
	res.replay += time.Since(start)
	for _, where := range o.probeIn {
		m := methodName(methodMemgate, where, o.probeIn[0])
		if err := h.probe(ctx, convs, system, where, m, res); err != nil {
			return nil, err
		}
		res.methods = append(res.methods, m)
	}
	for _, k := range []standin.Kind{standin.KindSummary, standin.KindFacts, standin.KindJSON} {
		res.sideCalls[k] += up.Count(k)
	}
	return histories, nil
}

// writeDetails writes one JSON line per judged probe.
func writeDetails(path string, ds []detail) error {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	for _, d := range ds {
		if err := enc.Encode(d); err != nil {
			return fmt.Errorf("encode details: %w", err)
		}
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// displayCommand is the command line shown in the report, without the
// output-file flags (their temp paths say nothing about the measurement).
func displayCommand(args []string) string {
	out := []string{"go run ./eval/cmd/eval"}
	for i := 1; i < len(args); i++ {
		a := args[i]
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && (name == "out" || name == "details") {
			if !hasValue {
				i++ // skip the value
			}
			continue
		}
		out = append(out, a)
	}
	return strings.Join(out, " ")
}
