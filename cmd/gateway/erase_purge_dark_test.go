package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/redis"
	"github.com/memgate/memgate/internal/tracing"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// queueTurnDirectly puts a turn of id saying text, received at, in the
// Redis capture stream of q, as another gateway whose save failed would
// have queued it.
func queueTurnDirectly(t *testing.T, q *redis.Queue, id memory.Identity, text string, at time.Time) {
	t.Helper()
	msg := func(role, s string) memory.Message {
		b, _ := json.Marshal(map[string]string{"role": role, "content": s})
		m, err := memory.ParseMessage(b)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ex := memory.Exchange{ID: record.NewExchangeID(), Identity: id, Model: "m", At: at, Received: at,
		Turn: []memory.Message{msg("user", text)}, Reply: msg("assistant", "Noted: "+text)}
	payload, err := json.Marshal(ex)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.EnqueueTurn(context.Background(), record.ConvKey(id), payload); err != nil {
		t.Fatal(err)
	}
}

// TestErasureAnswersWhileRedisIsDark: with Redis unreachable (what is
// sent to it dropped, nothing answered), erasing a user or deleting a
// conversation through the management API on PostgreSQL answers while
// Redis is still dark: 200 (404 for the conversation, which nothing
// stored holds: the queues cannot say), the store's erasure done, the purge of the
// user's turn waiting in the Redis capture stream pending (the turn still
// there, memgate_erasure_purges_pending saying so). The purge is retried
// in the background (memgate_erasure_purges_failed_total counts the
// attempts Redis left unanswered) and goes through once Redis is back;
// with the capture worker draining the stream meanwhile, nothing of the
// erased turn is stored either way.
func TestErasureAnswersWhileRedisIsDark(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	for _, tt := range []struct {
		name, path string
		notFound   bool // nothing stored: the answer is 404, the purge pending all the same
	}{
		{"user erased", "/v1/memory/users/alice", false},
		{"conversation deleted", "/v1/memory/conversations/c?user=alice", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			cfg := storeConfigs(t, up)["postgres+redis"](t)
			direct, err := redis.NewClient(cfg.Store.RedisURL)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = direct.Close() })
			q, err := redis.NewQueue(ctx, direct, redis.QueueConfig{Prefix: cfg.Store.RedisPrefix})
			if err != nil {
				t.Fatal(err)
			}
			g := newRedisGate(t, cfg.Store.RedisURL)
			cfg.Store.RedisURL = g.url
			m := openTestMemory(t, cfg) // no worker runs yet
			// The gateway's /metrics shows the Capturer's metrics, as a
			// connected engine registers them.
			reg := prometheus.NewRegistry()
			reg.MustRegister(m.Capturer.Collectors()...)
			h, err := newHTTP(cfg, engineFor(m.Core), nil, tracing.Off(), reg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			hs := httptest.NewServer(h.srv.Handler())
			t.Cleanup(hs.Close)
			alice := memory.Identity{Tenant: memory.DefaultTenant, User: "alice", Conversation: "c"}
			queueTurnDirectly(t, q, alice, "my code word is zqxdark", time.Now().Add(-time.Minute))

			g.darken()
			start := time.Now()
			type answer struct {
				status int
				body   []byte
				err    error
			}
			answered := make(chan answer, 1)
			go func() {
				req, _ := http.NewRequest(http.MethodDelete, hs.URL+tt.path, nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					answered <- answer{err: err}
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				answered <- answer{status: resp.StatusCode, body: b}
			}()
			a := awaitAnswer(t, answered)
			if a.err != nil {
				t.Fatal(a.err)
			}
			t.Logf("answered after %v (Redis dark; %d attempts to reach it given up meanwhile): %d %s", time.Since(start), g.abandoned(), a.status, a.body)
			var got struct {
				Deleted    bool   `json:"deleted"`
				Queued     *int   `json:"queued"`
				QueuePurge string `json:"queue_purge"`
			}
			if tt.notFound {
				// The conversation's one turn waits in the stream: nothing is
				// stored of it, and the queues cannot be asked.
				if a.status != http.StatusNotFound || bytes.Contains(a.body, []byte(`"deleted"`)) {
					t.Fatalf("answer while Redis is dark: %d %s; want 404 not_found (nothing stored, the queues silent)", a.status, a.body)
				}
			} else if a.status != http.StatusOK || json.Unmarshal(a.body, &got) != nil || !got.Deleted || got.QueuePurge != "pending" || got.Queued != nil {
				t.Fatalf("answer while Redis is dark: %d %s; want 200, deleted, queue_purge pending, no queued count", a.status, a.body)
			}
			if n, err := q.Pending(ctx); err != nil || n != 1 {
				t.Fatalf("capture stream holds %d entries (%v) as the erasure answers; want alice's turn, its purge pending", n, err)
			}
			if v := metricValue(t, hs.URL, "memgate_erasure_purges_pending"); v != "1" {
				t.Errorf("memgate_erasure_purges_pending = %q while Redis is dark, want 1", v)
			}
			eventually(t, "an attempt to purge left unanswered", func() bool {
				n, err := strconv.ParseFloat(metricValue(t, hs.URL, "memgate_erasure_purges_failed_total"), 64)
				return err == nil && n >= 1
			})
			if n, err := q.Pending(ctx); err != nil || n != 1 {
				t.Fatalf("capture stream holds %d entries (%v) while Redis is dark, want alice's turn", n, err)
			}

			g.lighten()
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); _ = m.Worker.Run(wctx) }()
			t.Cleanup(func() { cancel(); <-done })
			eventually(t, "the purge, once Redis is back", func() bool {
				n, err := q.Pending(ctx)
				return err == nil && n == 0 && metricValue(t, hs.URL, "memgate_erasure_purges_pending") == "0"
			})
			if msgs, err := m.store.Recent(ctx, alice, 10); err != nil || len(msgs) != 0 {
				t.Fatalf("alice's erased turn stored after the purge: %d messages, %v", len(msgs), err)
			}
		})
	}
}
