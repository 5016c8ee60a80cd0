package proxy

import (
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// containerReply is a Responses reply whose code interpreter ran in the
// container cntr_bob, which the provider made for it.
const containerReply = `{"id":"resp_ci","object":"response","status":"completed","model":"gpt-4.1",` +
	`"output":[{"id":"ci_1","type":"code_interpreter_call","status":"completed","code":"print(1)","container_id":"cntr_bob","outputs":null},` +
	`{"id":"msg_ci","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"1","annotations":[]}]}],` +
	`"usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2}}`

// containerStream is containerReply streamed.
const containerStream = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_ci\",\"object\":\"response\",\"status\":\"in_progress\",\"output\":[]}}\n\n" +
	"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0,\"item\":{\"id\":\"ci_1\",\"type\":\"code_interpreter_call\",\"status\":\"in_progress\",\"code\":\"\",\"container_id\":\"cntr_bob\"}}\n\n" +
	"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":" + containerReply + "}\n\n"

// TestStatesContainersBound: with a shared upstream key, the container a
// reply's code interpreter ran in (its items' container_id) is bound to
// the caller, and a request whose code interpreter tool names a container
// (tools[].container, an id) goes upstream only when it is the caller's:
// the provider would run another's code in that container, its files
// (another tenant's uploads and outputs) in reach. An id never given out
// is refused the same way, and the upstream is not called.
func TestStatesContainersBound(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole", true: "streamed"}[stream], func(t *testing.T) {
			mux := http.NewServeMux()
			mux.Handle("POST /v1/responses", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if stream {
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = w.Write([]byte(containerStream))
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(containerReply))
			}))
			up := upstreamtest.New(t, mux)
			states := newFakeStates()
			g := sharedGateway(t, up, states)
			h := map[string]string{"Authorization": "Bearer gw-key", "X-Memory-User": "bob"}
			auto := `{"model":"gpt-4.1","input":"Run it.","tools":[{"type":"code_interpreter","container":{"type":"auto"}}],"stream":` +
				map[bool]string{false: "false", true: "true"}[stream] + `}`
			if resp, b := g.post(t, "/v1/responses", auto, h); resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			states.mu.Lock()
			owner := states.owner[memory.ProviderState{Kind: memory.StateContainer, ID: "cntr_bob"}]
			states.mu.Unlock()
			if owner != "a/bob" {
				t.Fatalf("container cntr_bob bound to %q, want a/bob (bindings %v)", owner, states.owner)
			}
			named := `{"model":"gpt-4.1","input":"Again.","tools":[{"type":"code_interpreter","container":"cntr_bob"}]}`
			if resp, b := g.post(t, "/v1/responses", named, h); resp.StatusCode != http.StatusOK {
				t.Errorf("the owner naming its container: %d %s", resp.StatusCode, b)
			}
			for _, tt := range []struct{ user, body, id string }{
				{"eve", named, "cntr_bob"},
				{"eve", strings.Replace(named, "cntr_bob", "cntr_never", 1), "cntr_never"},
				{"bob", `{"model":"gpt-4.1","input":"hi","tools":[{"type":"function","name":"f","parameters":{}},{"type":"code_interpreter","container":"cntr_other"}]}`, "cntr_other"},
			} {
				h["X-Memory-User"] = tt.user
				before := up.Calls()
				resp, b := g.post(t, "/v1/responses", tt.body, h)
				_, _, param := apiErrorBody(t, b)
				if resp.StatusCode != http.StatusNotFound || param != "tools" || !strings.Contains(string(b), "Container with id '"+tt.id+"' not found.") {
					t.Errorf("%s naming container %s: %d %s", tt.user, tt.id, resp.StatusCode, b)
				}
				if up.Calls() != before {
					t.Errorf("%s naming container %s reached the upstream", tt.user, tt.id)
				}
			}
		})
	}
}
