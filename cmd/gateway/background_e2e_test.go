package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// bgWire is a background response of the Responses API in status, as
// the provider gives it (queued, in_progress: no output yet).
func bgWire(id, status string) string {
	output, usage := `[]`, `null`
	if status == "completed" {
		output = `[{"id":"msg_` + id + `","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Porto is in Portugal."}]}]`
		usage = `{"input_tokens":12,"input_tokens_details":{"cached_tokens":0},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":17}`
	}
	return `{"id":"` + id + `","object":"response","created_at":1764770000,"status":"` + status + `","background":true,"error":null,` +
		`"incomplete_details":null,"instructions":null,"model":"o3-2025-04-16","output":` + output + `,"parallel_tool_calls":true,` +
		`"previous_response_id":null,"store":true,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"usage":` + usage + `,"metadata":{}}`
}

// TestBackgroundResponseStored: through the real wiring, on both stores,
// a background response's turn is stored with its answer when the
// client's GET returns it completed, not with the empty reply of the
// queued response the POST got.
func TestBackgroundResponseStored(t *testing.T) {
	up := newBGProvider(t)
	for name, mk := range storeConfigs(t, up.Server) {
		t.Run(name, func(t *testing.T) {
			up.set("in_progress")
			g := startGateway(t, mk(t))
			who := "bg-" + strings.ReplaceAll(name, "+", "-")
			h := map[string]string{"Authorization": "Bearer sk-test", "X-Memory-User": who, "X-Memory-Conversation": "bg"}
			res := sendBody(t, g.URL+"/v1/responses", h, map[string]any{"model": "o3", "input": "Where is Porto?", "background": true})
			if res.Status != http.StatusOK || !strings.Contains(string(res.Body), `"queued"`) {
				t.Fatalf("%d %s", res.Status, res.Body)
			}
			getResponse(t, g.URL, h)
			up.done()
			getResponse(t, g.URL, h)
			msgs := waitStored(t, g, memory.Identity{Tenant: memory.DefaultTenant, User: who, Conversation: "bg"}, 2)
			if msgs[0].Content != "Where is Porto?" || msgs[1].Role != "assistant" || msgs[1].Content != "Porto is in Portugal." {
				t.Errorf("stored %q (%s), %q (%s)", msgs[0].Content, msgs[0].Role, msgs[1].Content, msgs[1].Role)
			}
		})
	}
}
