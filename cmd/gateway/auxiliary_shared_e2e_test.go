package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestTitleRequestOnAnotherProcessIsNotATurn: two gateway processes behind
// a load balancer, sharing one PostgreSQL and one Redis. A chat's turn is
// answered by A; the app's title request over it reaches B, which never
// saw the turn: B tells it by the prints A shared through Redis, answers
// it as sent (X-Memory-Auxiliary: transcript) and stores nothing of it.
// Once the user is erased (through A), the prints are gone from Redis
// too: the same request on B is a turn again.
func TestTitleRequestOnAnotherProcessIsNotATurn(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	cfg := storeConfigs(t, up)["postgres+redis"](t)
	a, b := startGateway(t, cfg), startGateway(t, cfg)
	const who = "lb-ana"
	h := map[string]string{"Authorization": "Bearer sk-test", "X-Memory-User": who}
	said := "I am planning a trip to Kyoto in April with my sister."
	history := []map[string]any{user(said)}
	// The chat's first turn, stored in the user's default conversation
	// until its second derives the chat's.
	postBody(t, a.URL, h, map[string]any{"model": "gpt-4o-mini", "stream": true, "messages": history})
	waitStored(t, a, memory.Identity{Tenant: memory.DefaultTenant, User: who, Conversation: memory.DefaultConversation}, 2)
	history = append(history, assistant("ack: "+said))

	title := map[string]any{"model": "gpt-4o-mini", "stream": false, "max_completion_tokens": 1000,
		"messages": []map[string]any{{"role": "user", "content": strings.Replace(owuiTitle, "%s", owuiTranscript(history, 2), 1)}}}
	res := postBody(t, b.URL, h, title)
	if got := res.Header.Get("X-Memory-Auxiliary"); got != "transcript" {
		t.Errorf("the title request on the other process: X-Memory-Auxiliary %q, want transcript", got)
	}
	if got := res.Header.Get("X-Memory-Degraded"); got != "" {
		t.Errorf("X-Memory-Degraded %q with Redis up, want none", got)
	}
	// Nothing of it stored: a later turn of the chat (on B) finds the
	// user's memory as the first turn left it.
	history = append(history, user("Which temples should we visit first?"))
	conv := postBody(t, b.URL, h, map[string]any{"model": "gpt-4o-mini", "messages": history}).Header.Get("X-Memory-Conversation")
	id := memory.Identity{Tenant: memory.DefaultTenant, User: who, Conversation: conv}
	waitStored(t, b, id, 4)
	list, err := b.mem.store.Conversations(context.Background(), memory.DefaultTenant, who)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != conv {
		t.Errorf("conversations %+v, want only %s", list, conv)
	}
	got, _ := storedContents(t, b, id)
	for _, m := range got {
		if strings.Contains(m, "### Task") || strings.Contains(m, "chat_history") {
			t.Errorf("the title request was stored: %.80q", m)
		}
	}

	// Erased through A: no process tells the title request by the
	// erased user's prints any more.
	if st := apiCall(t, http.MethodDelete, a.URL+"/v1/memory/users/"+who, nil, nil, nil); st != http.StatusOK {
		t.Fatalf("erase: status %d", st)
	}
	res = postBody(t, b.URL, h, title)
	if got := res.Header.Get("X-Memory-Auxiliary"); got != "" {
		t.Errorf("after the erasure: X-Memory-Auxiliary %q, want none (the prints outlived the erasure)", got)
	}
}

// TestTitleCheckFallsBackWhenRedisIsDown: with the Redis the prints are
// shared through unreachable (an address nothing listens on), chat is
// answered 200 and stored as ever; the app's title request is still told
// by this process's own prints; a request of the candidate shape that
// they do not match (a newest-only client's turn) is answered and stored,
// marked X-Memory-Degraded: transcripts and counted.
func TestTitleCheckFallsBackWhenRedisIsDown(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	cfg := storeConfigs(t, up)["postgres+redis"](t)
	cfg.Store.RedisURL = unreachableRedisURL(t)
	g := startGateway(t, cfg)
	const who = "dark-ana"
	h := map[string]string{"Authorization": "Bearer sk-test", "X-Memory-User": who, "X-Memory-Conversation": "trip"}
	said := "I am planning a trip to Kyoto in April with my sister."
	postBody(t, g.URL, h, map[string]any{"model": "gpt-4o-mini", "messages": []map[string]any{user(said)}})
	id := memory.Identity{Tenant: memory.DefaultTenant, User: who, Conversation: "trip"}
	waitStored(t, g, id, 2)

	history := []map[string]any{user(said), assistant("ack: " + said)}
	res := postBody(t, g.URL, h, map[string]any{"model": "gpt-4o-mini", "stream": false,
		"messages": []map[string]any{{"role": "user", "content": strings.Replace(owuiTitle, "%s", owuiTranscript(history, 2), 1)}}})
	if got := res.Header.Get("X-Memory-Auxiliary"); got != "transcript" {
		t.Errorf("the title request: X-Memory-Auxiliary %q, want transcript (this process's own prints)", got)
	}

	next := "And which temples should we visit first in the morning?"
	res = postBody(t, g.URL, h, map[string]any{"model": "gpt-4o-mini", "messages": []map[string]any{user(next)}})
	if got := res.Header.Get("X-Memory-Auxiliary"); got != "" {
		t.Errorf("a newest-only turn: X-Memory-Auxiliary %q, want none", got)
	}
	if got := res.Header.Get("X-Memory-Degraded"); !strings.Contains(got, memory.DegradedTranscripts) {
		t.Errorf("a turn checked without the shared prints: X-Memory-Degraded %q, want it to name %q", got, memory.DegradedTranscripts)
	}
	msgs := waitStored(t, g, id, 4)
	if msgs[2].Content != next {
		t.Errorf("stored %q, want the turn %q", msgs[2].Content, next)
	}
	if v := metricValue(t, g.URL, `memgate_auxiliary_prints_failed_total{op="read"}`); v == "" || v == "0" {
		t.Errorf("memgate_auxiliary_prints_failed_total{op=\"read\"} = %q, want counted", v)
	}
}
