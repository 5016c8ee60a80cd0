package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// bgStreamEvent is one event of a background response's stream.
func bgStreamEvent(typ string, seq int, rest string) string {
	return "event: " + typ + "\ndata: {\"type\":\"" + typ + "\",\"sequence_number\":" + strconv.Itoa(seq) + "," + rest + "}\n\n"
}

// newBGStreamProvider is a fake provider of one background response,
// resp_bg, streamed: a POST with stream:true gets its head (created, then
// the first delta) and then waits for the gateway to hang up; a GET with
// stream=true gets the rest, to response.completed.
func newBGStreamProvider(t *testing.T) *upstreamtest.Server {
	head := bgStreamEvent("response.created", 0, `"response":`+bgWire("resp_bg", "queued")) +
		bgStreamEvent("response.output_item.added", 1, `"output_index":0,"item":{"id":"msg_resp_bg","type":"message","status":"in_progress","role":"assistant","content":[]}`) +
		bgStreamEvent("response.output_text.delta", 2, `"item_id":"msg_resp_bg","output_index":0,"content_index":0,"delta":"Porto is","logprobs":[]`)
	tail := bgStreamEvent("response.output_text.delta", 3, `"item_id":"msg_resp_bg","output_index":0,"content_index":0,"delta":" in Portugal.","logprobs":[]`) +
		bgStreamEvent("response.output_item.done", 4, `"output_index":0,"item":{"id":"msg_resp_bg","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Porto is in Portugal."}]}`) +
		bgStreamEvent("response.completed", 5, `"response":`+bgWire("resp_bg", "completed"))
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/responses", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, head)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	mux.HandleFunc("GET /v1/responses/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, tail)
	})
	return upstreamtest.New(t, mux)
}

// TestBackgroundStreamResumedAtOnceOnAnotherGateway: two gateways share
// one PostgreSQL and Redis. A client's background stream through A is
// dropped once it has the response's first event, and resumed at once
// through B (GET stream=true): the exchange was held in the store before
// that event reached the client, so B stores the turn, once, and no held
// row is left.
func TestBackgroundStreamResumedAtOnceOnAnotherGateway(t *testing.T) {
	cfg := storeConfigs(t, newBGStreamProvider(t))["postgres+redis"](t)
	a, b := startGateway(t, cfg), startGateway(t, cfg)
	h := map[string]string{"Authorization": "Bearer sk-test", "X-Memory-User": "bg-resumed", "X-Memory-Conversation": "bg"}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.URL+"/v1/responses",
		strings.NewReader(`{"model":"o3","input":"Where is Porto?","background":true,"stream":true}`))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Memory-Degraded") != "" {
		t.Fatalf("POST: %d, degraded %q", resp.StatusCode, resp.Header.Get("X-Memory-Degraded"))
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && !strings.Contains(sc.Text(), "response.created") {
	}
	cancel()
	resp.Body.Close()

	get, _ := http.NewRequest(http.MethodGet, b.URL+"/v1/responses/resp_bg?stream=true&starting_after=2", nil)
	for k, v := range h {
		get.Header.Set(k, v)
	}
	gresp, err := http.DefaultClient.Do(get)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(gresp.Body)
	gresp.Body.Close()
	if gresp.StatusCode != http.StatusOK || !strings.Contains(string(body), "response.completed") {
		t.Fatalf("GET: %d %s", gresp.StatusCode, body)
	}
	msgs := waitStored(t, b, memory.Identity{Tenant: memory.DefaultTenant, User: "bg-resumed", Conversation: "bg"}, 2)
	if len(msgs) != 2 || msgs[0].Content != "Where is Porto?" || msgs[1].Content != "Porto is in Portugal." {
		t.Errorf("stored %+v, want the turn and its answer, once", msgs)
	}
	conn, err := pgx.Connect(context.Background(), cfg.Store.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var left int
	if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM held_responses`).Scan(&left); err != nil || left != 0 {
		t.Errorf("held rows left: %d (%v), want 0", left, err)
	}
}
