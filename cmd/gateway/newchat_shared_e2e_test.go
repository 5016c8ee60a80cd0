package main

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/redis"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// sharedNewChatConfig is the PostgreSQL + Redis configuration two gateway
// processes behind one load balancer share, without side models (the
// upstream sees the clients' requests alone).
func sharedNewChatConfig(t *testing.T, up *upstreamtest.Server) config.Config {
	cfg := storeConfigs(t, up)["postgres+redis"](t)
	cfg.Upstream.APIKey = ""
	return cfg
}

// waitResenderShared waits until the Redis of cfg holds a user seen
// resending their history (one key under the deployment's prefix).
func waitResenderShared(t *testing.T, cfg config.Config) {
	t.Helper()
	rdb, err := redis.NewClient(cfg.Store.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	eventually(t, "the resender shared through Redis", func() bool {
		keys, err := rdb.Keys(context.Background(), cfg.Store.RedisPrefix+"resender:*").Result()
		return err == nil && len(keys) == 1
	})
}

// seenResending makes who a user whose app resends its history, as the
// tests of the shared signal start: their one-question chat C, sent to
// oneQuestion, stays in default (waited for until stored there); their
// chat A's second turn, sent to resending after its first, resends it
// and goes to a derived conversation, so that process has seen who
// resend. It returns the chats' system prompt and chat C's question.
func seenResending(t *testing.T, oneQuestion, resending, who string) (sys map[string]any, c1 string) {
	t.Helper()
	sys = map[string]any{"role": "system", "content": "You are terse."}
	c1 = "Chat C: what is a good name for a cat?"
	if c := headerUserChat(t, oneQuestion, who, []map[string]any{sys, user(c1)}); c != memory.DefaultConversation {
		t.Fatalf("chat C in %q, want default", c)
	}
	waitConversation(t, oneQuestion, who, memory.DefaultConversation, []string{"user: " + c1, "assistant: ack: " + c1})
	a1, a2 := "Chat A: plan a trip to Rome.", "Chat A: three days."
	headerUserChat(t, resending, who, []map[string]any{sys, user(a1)})
	if c := headerUserChat(t, resending, who, []map[string]any{sys, user(a1), assistant("ack: " + a1), user(a2)}); c == memory.DefaultConversation {
		t.Fatal("chat A's second turn in default, want a derived conversation")
	}
	return sys, c1
}

// wantUpstream fails the test unless the last client chat request, what,
// went upstream as want (upstreamTexts' lines).
func wantUpstream(t *testing.T, up *upstreamtest.Server, what string, want ...string) {
	t.Helper()
	if got := upstreamTexts(t, up); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s went upstream as\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// probeDefault sends, as a newest-only request of who that stores nothing
// (X-Memory-Mode: read), one question naming no conversation to url, and
// returns the messages that went upstream.
func probeDefault(t *testing.T, url string, up *upstreamtest.Server, who, question string) []string {
	t.Helper()
	r := chat(t, url, map[string]string{"X-Memory-User": who, "X-Memory-Mode": "read"}, false, user(question))
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	return upstreamTexts(t, up)
}

// TestNewChatOnAnotherGatewayGetsNoDefaultHistory: two gateway processes
// share one PostgreSQL and Redis. The user's one-question chat C is
// answered by B and stays in default; their app's chat A resends its
// history to A. Chat B's first turn then reaches B, which never saw them
// resend: it goes upstream without chat C's exchange, by what A shared.
func TestNewChatOnAnotherGatewayGetsNoDefaultHistory(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	cfg := sharedNewChatConfig(t, up)
	a, b := startGateway(t, cfg), startGateway(t, cfg)
	const ana = "lb-ana"
	sys, _ := seenResending(t, b.URL, a.URL, ana)
	waitResenderShared(t, cfg)

	b1 := "Chat B: help me bake bread."
	r := chat(t, b.URL, map[string]string{"X-Memory-User": ana}, false, sys, user(b1))
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	wantUpstream(t, up, "chat B's first request, on the other gateway", "system: You are terse.", "user: "+b1)
	if d := r.Header.Get("X-Memory-Degraded"); d != "" {
		t.Errorf("X-Memory-Degraded %q with Redis up, want none", d)
	}
}

// TestNewChatSignalErasedAcrossGateways: the user seen resending by A, B
// takes their new chat for one (as TestNewChatOnAnotherGatewayGetsNoDefaultHistory).
// Once A erases them, B (once the erasure's notice reached it) and a
// process started afterwards take their requests in default for a
// newest-only client's again: default's recent turns go with them, as
// they do for a user never seen resending.
func TestNewChatSignalErasedAcrossGateways(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	cfg := sharedNewChatConfig(t, up)
	a, b := startGateway(t, cfg), startGateway(t, cfg)
	const ana = "lb-erased"
	_, c1 := seenResending(t, b.URL, a.URL, ana)
	waitResenderShared(t, cfg)
	if got := probeDefault(t, b.URL, up, ana, "A new chat?"); slices.Contains(got, "user: "+c1) {
		t.Fatalf("before the erasure, B's new chat went upstream with default's turns:\n%s", strings.Join(got, "\n"))
	}

	if code := apiCall(t, http.MethodDelete, a.URL+"/v1/memory/users/"+ana, nil, nil, nil); code != http.StatusOK {
		t.Fatalf("DELETE user on A: %d", code)
	}
	n1 := "note 1: the cat is called Miso."
	headerUserChat(t, b.URL, ana, []map[string]any{user(n1)})
	waitConversation(t, b.URL, ana, memory.DefaultConversation, []string{"user: " + n1, "assistant: ack: " + n1})
	eventually(t, "B taking the erased user for a newest-only client", func() bool {
		return slices.Contains(probeDefault(t, b.URL, up, ana, "What is the cat called?"), "user: "+n1)
	})
	for name, url := range map[string]string{"A": a.URL, "a process started after the erasure": startGateway(t, cfg).URL} {
		if got := probeDefault(t, url, up, ana, "What is the cat called?"); !slices.Contains(got, "user: "+n1) {
			t.Errorf("after the erasure, %s sent the user's request in default without its recent turns:\n%s", name, strings.Join(got, "\n"))
		}
	}
}

// TestNewChatSignalWithRedisDown: with the Redis the signal is shared
// through unreachable (an address nothing listens on), every request is
// answered 200; a user seen resending by this process still gets new
// chats without default's turns (its own signal); a newest-only user's
// request, which the shared signal could not be read for, gets default's
// recent turns, marked X-Memory-Degraded: newchat; the failed write of
// the signal is counted.
func TestNewChatSignalWithRedisDown(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	cfg := sharedNewChatConfig(t, up)
	cfg.Store.RedisURL = unreachableRedisURL(t)
	g := startGateway(t, cfg)

	const ana = "dark-ana"
	sys, _ := seenResending(t, g.URL, g.URL, ana)
	b1 := "Chat B: help me bake bread."
	headerUserChat(t, g.URL, ana, []map[string]any{sys, user(b1)})
	wantUpstream(t, up, "chat B's first request", "system: You are terse.", "user: "+b1)

	const solo = "dark-solo"
	headerUserChat(t, g.URL, solo, []map[string]any{user("note 0")})
	waitConversation(t, g.URL, solo, memory.DefaultConversation, []string{"user: note 0", "assistant: ack: note 0"})
	r := chat(t, g.URL, map[string]string{"X-Memory-User": solo}, false, user("note 1"))
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	wantUpstream(t, up, "the newest-only turn (default's recent turns before it)", "user: note 0", "assistant: ack: note 0", "user: note 1")
	if d := r.Header.Get("X-Memory-Degraded"); !strings.Contains(d, memory.DegradedNewChat) {
		t.Errorf("X-Memory-Degraded %q, want it to name %q", d, memory.DegradedNewChat)
	}
	eventually(t, "the failed write counted", func() bool {
		v := metricValue(t, g.URL, `memgate_newchat_signal_failed_total{op="write"}`)
		return v != "" && v != "0"
	})
}
