package main

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestHangUpAfterMessageStoresTheCallAfterIt: a Responses client that
// offered tools and hangs up once the stream's message is done (an SDK
// loop that stops at the text) does not cancel the upstream: the gateway
// reads on to response.completed, and the turn is stored as the upstream
// finished it, the function call after the message included — on both
// stores.
func TestHangUpAfterMessageStoresTheCallAfterIt(t *testing.T) {
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	shown := []string{
		ev("response.created", `{"type":"response.created","response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`),
		ev("response.output_item.added", `{"type":"response.output_item.added","output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}`),
		ev("response.content_part.added", `{"type":"response.content_part.added","output_index":0,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`),
		ev("response.output_text.delta", `{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"Let me check."}`),
		ev("response.output_text.done", `{"type":"response.output_text.done","output_index":0,"content_index":0,"text":"Let me check."}`),
		ev("response.content_part.done", `{"type":"response.content_part.done","output_index":0,"content_index":0,"part":{"type":"output_text","text":"Let me check.","annotations":[]}}`),
		ev("response.output_item.done", `{"type":"response.output_item.done","output_index":0,"item":{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Let me check.","annotations":[]}]}}`),
	}
	rest := []string{
		ev("response.output_item.added", `{"type":"response.output_item.added","output_index":1,"item":{"id":"fc_1","type":"function_call","status":"in_progress","call_id":"call_1","name":"get_weather","arguments":""}}`),
		ev("response.function_call_arguments.done", `{"type":"response.function_call_arguments.done","output_index":1,"arguments":"{\"city\":\"Lisbon\"}"}`),
		ev("response.output_item.done", `{"type":"response.output_item.done","output_index":1,"item":{"id":"fc_1","type":"function_call","status":"completed","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Lisbon\"}"}}`),
		ev("response.completed", `{"type":"response.completed","response":{"id":"resp_1","object":"response","status":"completed","output":[],"usage":{"input_tokens":5,"output_tokens":9,"total_tokens":14}}}`),
	}
	const body = `{"model":"gpt-4o","stream":true,"input":"What is the weather in Lisbon?","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{}}}]}`
	configs := storeConfigs(t, upstreamtest.New(t, nil))
	for name, mk := range configs {
		t.Run(name, func(t *testing.T) {
			feed := upstreamtest.NewFeed()
			up := upstreamtest.New(t, feed)
			cfg := mk(t)
			cfg.Upstream.BaseURL = up.URL()
			g := startGateway(t, cfg)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.URL+"/v1/responses", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Memory-User", "alice")
			req.Header.Set("X-Memory-Conversation", "weather")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			for _, e := range shown {
				feed.SendRaw(t, e)
				var got strings.Builder
				for !strings.HasSuffix(got.String(), "\n\n") {
					line, err := br.ReadString('\n')
					if err != nil {
						t.Fatalf("read event: %v (got %q)", err, got.String())
					}
					got.WriteString(line)
				}
				if got.String() != e {
					t.Fatalf("event %q, want %q", got.String(), e)
				}
			}
			cancel()
			// The gateway reads on: the upstream request stays open.
			eventually(t, "the gateway to read on after the hang-up", func() bool {
				select {
				case <-feed.Canceled():
					t.Fatal("the upstream request was cancelled with the client, though its message was done")
				default:
				}
				return strings.Contains(metricsText(t, g.URL), "\nmemgate_hangup_reads_in_flight 1\n")
			})
			for _, e := range rest {
				feed.SendRaw(t, e)
			}
			feed.Close(t)
			id := memory.Identity{Tenant: memory.DefaultTenant, User: "alice", Conversation: "weather"}
			var got []string
			eventually(t, "the turn to be stored", func() bool {
				got, _ = storedContents(t, g, id)
				return len(got) == 2
			})
			if got[0] != "user: What is the weather in Lisbon?" || !strings.HasPrefix(got[1], "assistant: Let me check.") ||
				!strings.Contains(got[1], "get_weather") || !strings.Contains(got[1], "Lisbon") {
				t.Errorf("stored %q, want the question, and the message with the call after it", got)
			}
		})
	}
}

// metricsText returns the gateway's /metrics page.
func metricsText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return b.String()
}
