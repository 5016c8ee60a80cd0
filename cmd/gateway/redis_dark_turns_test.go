package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/postgres"
	"github.com/memgate/memgate/internal/testenv"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// metricSum scrapes /metrics and sums the samples of name whose labels
// contain every one of labels (`call="queued_check"`), and those without
// any of exclude; ok is false when no sample matched.
func metricSum(t *testing.T, base, name string, labels, exclude []string) (sum float64, ok bool) {
	t.Helper()
lines:
	for _, line := range metricLines(t, base) {
		f := strings.Fields(line)
		if len(f) != 2 || (f[0] != name && !strings.HasPrefix(f[0], name+"{")) {
			continue
		}
		for _, l := range labels {
			if !strings.Contains(f[0], l) {
				continue lines
			}
		}
		for _, l := range exclude {
			if strings.Contains(f[0], l) {
				continue lines
			}
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			t.Fatalf("metric %s: %v", line, err)
		}
		sum, ok = sum+v, true
	}
	return sum, ok
}

// TestChatTurnsSkipRedisOnceItHangs: `gateway serve` on PostgreSQL with
// its Redis behind a gate that goes dark (what is sent dropped, nothing
// answered, new connections accepted and never served: a Redis paused
// or a network dropping packets). Once a request-path Redis call has
// run out of its time, the gateway's breaker opens: the turns after it
// make no request-path Redis call (the queued-turn check, the enrichment
// and capture enqueues, the shared prints and new-chat signal), each one
// skipped and counted, until a background probe sees Redis answer again,
// after which they are made again. Every turn answered meanwhile, streamed
// or not, is stored once, in order, in PostgreSQL. How long each turn
// took, and the commands the gate dropped while it ran, are logged (the
// slow turns' Redis waits), never asserted.
func TestChatTurnsSkipRedisOnceItHangs(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	pgURL, prefix := testenv.PostgresURL(t), testenv.RedisPrefix(t)
	g := newRedisGate(t, testenv.RedisURL(t))
	dir := t.TempDir()
	cfg := "store:\n  driver: postgres\n  postgres_url: " + strconv.Quote(pgURL) +
		"\n  redis_url: " + strconv.Quote(g.url) + "\n  redis_prefix: " + strconv.Quote(prefix) + "\n" +
		"memory:\n  load_timeout: 2s\n  embedding_timeout: 10s\n"
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	base, logs := mustServeEnv(t, map[string]string{"GATEWAY_CONFIG": path, "GATEWAY_UPSTREAM_BASE_URL": up.URL(), "GATEWAY_UPSTREAM_API_KEY": "k"})
	ctx := context.Background()
	st, err := postgres.Open(ctx, pgURL, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })

	id := memory.Identity{Tenant: memory.DefaultTenant, User: "rita", Conversation: "dark-redis"}
	h := map[string]string{"X-Memory-User": id.User, "X-Memory-Conversation": id.Conversation}
	var sent []string
	turn := func(i int) (time.Duration, chatResult) {
		text := fmt.Sprintf("turn %d about the lighthouse", i)
		start := time.Now()
		r := chat(t, base, h, i%2 == 1, user(text))
		took := time.Since(start)
		if r.Status != http.StatusOK {
			t.Fatalf("turn %d: status %d: %s", i, r.Status, r.Body)
		}
		sent = append(sent, text)
		return took, r
	}
	// requestPath sums the request-path Redis calls made (not skipped).
	requestPath := func() float64 {
		n, _ := metricSum(t, base, "memgate_redis_calls_total", nil, []string{`outcome="skipped"`})
		return n
	}
	open := func() bool {
		v, ok := metricSum(t, base, "memgate_redis_breaker_open", nil, nil)
		return ok && v == 1
	}
	for i := range 2 {
		turn(i)
	}
	if n := requestPath(); n == 0 || open() {
		t.Fatalf("with Redis up: %v request-path Redis calls, breaker open %v; want calls made, breaker closed", n, open())
	}

	g.darken()
	const dark = 20
	attemptsAtOpen, openedAt := -1.0, -1
	for i := 2; i < 2+dark; i++ {
		start := time.Now()
		took, r := turn(i)
		t.Logf("turn %d (stream %v): %v, degraded %q; Redis commands sent meanwhile: %v", i, i%2 == 1, took.Round(10*time.Millisecond),
			r.Header.Get("X-Memory-Degraded"), g.droppedBetween(start, time.Now()))
		if attemptsAtOpen < 0 && open() {
			attemptsAtOpen, openedAt = requestPath(), i
		}
	}
	if attemptsAtOpen < 0 {
		t.Fatalf("the breaker never opened over %d turns with Redis dark (memgate_redis_breaker_open absent or 0): every turn tried Redis again", dark)
	}
	if n := requestPath(); n != attemptsAtOpen {
		t.Errorf("request-path Redis calls went from %v (breaker open, after turn %d) to %v while Redis stayed dark; want none made while open", attemptsAtOpen, openedAt, n)
	}
	if n, _ := metricSum(t, base, "memgate_redis_calls_total", []string{`outcome="skipped"`, `call="queued_check"`}, nil); n == 0 {
		t.Error("no queued-turn check skipped while the breaker was open")
	}
	if n, _ := metricSum(t, base, "memgate_capture_failures_total", []string{`stage="queued_check"`}, nil); n == 0 {
		t.Error(`a skipped queued-turn check was not counted as memgate_capture_failures_total{stage="queued_check"}`)
	}

	g.lighten()
	eventually(t, "the probe to see Redis again and close the breaker", func() bool { return !open() })
	before := requestPath()
	turn(2 + dark)
	if n := requestPath(); n <= before {
		t.Errorf("request-path Redis calls %v after a turn once the breaker closed, %v before; want the calls made again", n, before)
	}

	want := len(sent)
	var msgs []memory.Message
	eventually(t, "every turn stored", func() bool {
		msgs, err = st.Recent(ctx, id, 1000)
		return err == nil && len(msgs) >= 2*want
	})
	if len(msgs) != 2*want {
		t.Fatalf("stored %d messages for %d turns", len(msgs), want)
	}
	for i, text := range sent {
		if msgs[2*i].Content != text || msgs[2*i+1].Content != "ack: "+text {
			t.Fatalf("stored message %d: %q / %q, want turn %q and its answer, in order (logs:\n%s)", 2*i, msgs[2*i].Content, msgs[2*i+1].Content, text, logs)
		}
	}
}
