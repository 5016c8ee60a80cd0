package admin

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
)

// TestPreviewPerAPI: ?api= reads the body as that API's, asks for the same
// memory request, and answers the body its adapter would send upstream.
func TestPreviewPerAPI(t *testing.T) {
	note := json.RawMessage(`{"role":"system","content":"Memory: tea."}`)
	got := make(chan memory.Request, 1)
	prep := preparerFunc(func(_ context.Context, req memory.Request) (memory.Prepared, error) {
		got <- req
		return memory.Prepared{Messages: append(memory.Raws(req.Messages), note), TokensSent: 10}, nil
	})
	url := mustAdmin(t, New(identity.New(nil), nil, nil, prep, 1<<20, 0, slog.New(slog.DiscardHandler)))
	for _, tc := range []struct {
		api, body, want string
		noRecent        bool
	}{
		{"chat", chat, `"content":"Memory: tea."`, false},
		{"messages", `{"model":"claude-sonnet-4-6","max_tokens":9,"system":"Be brief.","messages":[{"role":"user","content":"What do I like?"}]}`,
			`"system":"Be brief.\n\nMemory: tea."`, false},
		{"responses", `{"model":"gpt-4.1","instructions":"Be brief.","input":"What do I like?","previous_response_id":"resp_1"}`,
			`"instructions":"Be brief.\n\nMemory: tea."`, true},
	} {
		t.Run(tc.api, func(t *testing.T) {
			resp, b := post(t, url+"/v1/memory/preview?api="+tc.api, tc.body, map[string]string{"X-Memory-User": "alice", "X-Memory-Budget": "700"})
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			var p previewResponse
			if err := json.Unmarshal(b, &p); err != nil {
				t.Fatal(err)
			}
			if p.API != tc.api || !strings.Contains(string(p.Body), tc.want) || len(p.Messages) != 3 {
				t.Errorf("preview %s", b)
			}
			req := <-got
			if req.User != "alice" || req.Budget != 700 || req.NoRecent != tc.noRecent || req.Messages[len(req.Messages)-1].Content != "What do I like?" {
				t.Errorf("memory request %+v", req)
			}
		})
	}
	for _, bad := range []struct{ query, body string }{
		{"?api=gemini", chat},
		{"?api=messages", chat}, // a chat body is not a Messages body (no role system there)
		{"?api=responses", `{"model":"gpt-4.1"}`},
	} {
		resp, b := post(t, url+"/v1/memory/preview"+bad.query, bad.body, map[string]string{"X-Memory-User": "alice"})
		if resp.StatusCode != 400 {
			t.Errorf("%s: status %d, want 400: %s", bad.query, resp.StatusCode, b)
		}
	}
}
