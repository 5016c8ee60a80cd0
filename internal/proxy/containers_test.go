package proxy

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/identity"
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

// replyUpstream is a fake upstream answering pattern's requests with
// whole, or with the event stream streamed.
func replyUpstream(t *testing.T, pattern, whole, streamed string, stream bool) *upstreamtest.Server {
	mux := http.NewServeMux()
	mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte(streamed))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(whole))
	}))
	return upstreamtest.New(t, mux)
}

// mustOwn stops the test unless st is bound to owner ("tenant/user").
func mustOwn(t *testing.T, states *fakeStates, st memory.ProviderState, owner string) {
	t.Helper()
	states.mu.Lock()
	defer states.mu.Unlock()
	if got := states.owner[st]; got != owner {
		t.Fatalf("%v bound to %q, want %s (bindings %v)", st, got, owner, states.owner)
	}
}

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
			up := replyUpstream(t, "POST /v1/responses", containerReply, containerStream, stream)
			states := newFakeStates()
			g := sharedGateway(t, up, states)
			h := map[string]string{"Authorization": "Bearer gw-key", "X-Memory-User": "bob"}
			auto := `{"model":"gpt-4.1","input":"Run it.","tools":[{"type":"code_interpreter","container":{"type":"auto"}}],"stream":` +
				map[bool]string{false: "false", true: "true"}[stream] + `}`
			if resp, b := g.post(t, "/v1/responses", auto, h); resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			mustOwn(t, states, memory.ProviderState{Kind: memory.StateContainer, ID: "cntr_bob"}, "a/bob")
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

// anthropicContainerReply is a Messages reply whose code execution ran
// in the container container_bob, which the provider made for it.
const anthropicContainerReply = `{"id":"msg_ce","type":"message","role":"assistant","model":"claude-sonnet-4-5",` +
	`"content":[{"type":"text","text":"1"}],"stop_reason":"end_turn","stop_sequence":null,` +
	`"container":{"id":"container_bob","expires_at":"2026-12-02T15:00:00Z"},"usage":{"input_tokens":1,"output_tokens":1}}`

// anthropicContainerStream is anthropicContainerReply streamed: the
// container comes in the message_delta event.
const anthropicContainerStream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_ce\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"container\":null,\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"1\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null,\"container\":{\"id\":\"container_bob\",\"expires_at\":\"2026-12-02T15:00:00Z\"}},\"usage\":{\"output_tokens\":1}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// anthropicGateway is a gateway with a gateway key for tenant a and the
// operator's Anthropic key for every tenant, over states, forwarding
// passthrough.
func anthropicGateway(t *testing.T, up *upstreamtest.Server, states StateBinder, passthrough ...string) *gateway {
	t.Helper()
	keys := []identity.Key{{Hash: identity.HashKey("gw-key"), Tenant: "a"}}
	return mustGateway(t, up, func(c *gatewayConfig) {
		c.Upstream.Anthropic.BaseURL = up.URL()
		c.Upstream.Anthropic.APIKey = "sk-ant-operator"
		c.StateRetention = time.Hour
		c.Passthrough = passthrough
	}, Deps{Resolver: identity.New(keys), States: states})
}

// TestStatesAnthropicContainersBound: with gateway keys and the
// operator's Anthropic key, the container a Messages reply's code
// execution ran in (its container.id, whole or in a stream's events) is
// bound to the caller, and a request naming a container (container: an
// id, or an object's id) goes upstream only when it is the caller's, as
// on the Responses API: the provider would run another tenant's
// container, its files in reach. A container object giving a member
// twice is refused.
func TestStatesAnthropicContainersBound(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole", true: "streamed"}[stream], func(t *testing.T) {
			up := replyUpstream(t, "POST /v1/messages", anthropicContainerReply, anthropicContainerStream, stream)
			states := newFakeStates()
			g := anthropicGateway(t, up, states)
			h := map[string]string{"Authorization": "Bearer gw-key", "X-Memory-User": "bob"}
			first := `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"Run it."}],` +
				`"tools":[{"type":"code_execution_20250825","name":"code_execution"}],"stream":` + map[bool]string{false: "false", true: "true"}[stream] + `}`
			if resp, b := g.post(t, "/v1/messages", first, h); resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			mustOwn(t, states, memory.ProviderState{Kind: memory.StateContainer, ID: "container_bob"}, "a/bob")
			named := `{"model":"claude-sonnet-4-5","max_tokens":64,"container":"container_bob","messages":[{"role":"user","content":"Again."}]}`
			object := strings.Replace(named, `"container_bob"`, `{"id":"container_bob"}`, 1)
			for _, body := range []string{named, object} {
				if resp, b := g.post(t, "/v1/messages", body, h); resp.StatusCode != http.StatusOK {
					t.Errorf("the owner naming its container: %d %s", resp.StatusCode, b)
				}
			}
			for _, tt := range []struct {
				user, body string
				status     int
				want       string
			}{
				{"eve", named, http.StatusNotFound, "Container with id 'container_bob' not found."},
				{"eve", object, http.StatusNotFound, "Container with id 'container_bob' not found."},
				{"eve", strings.Replace(named, "container_bob", "container_never", 1), http.StatusNotFound, "Container with id 'container_never' not found."},
				{"bob", strings.Replace(object, `{"id":"container_bob"}`, `{"id":"container_eve","id":"container_bob"}`, 1), http.StatusBadRequest, `the key \"id\"`},
			} {
				h["X-Memory-User"] = tt.user
				before := up.Calls()
				resp, b := g.post(t, "/v1/messages", tt.body, h)
				if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.want) || !strings.Contains(string(b), `"type":"error"`) {
					t.Errorf("%s: %s: %d %s", tt.user, tt.body, resp.StatusCode, b)
				}
				if up.Calls() != before {
					t.Errorf("%s: %s reached the upstream", tt.user, tt.body)
				}
			}
		})
	}
}

// anthropicFileResult is a Messages reply's bash code execution result
// naming the file its code wrote, file_bob.
const anthropicFileResult = `{"type":"bash_code_execution_tool_result","tool_use_id":"srvtoolu_1","content":{"type":"bash_code_execution_result",` +
	`"stdout":"saved","stderr":"","return_code":0,"content":[{"type":"bash_code_execution_output","file_id":"file_bob"}]}}`

// anthropicFileReply is a Messages reply whose code execution, in
// container_bob, wrote file_bob, after pad (blocks of its content).
func anthropicFileReply(pad string) string {
	return `{"id":"msg_cf","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[` + pad +
		`{"type":"server_tool_use","id":"srvtoolu_1","name":"bash_code_execution","input":{"command":"python plot.py"}},` + anthropicFileResult + `,` +
		`{"type":"text","text":"Saved."}],"stop_reason":"end_turn","stop_sequence":null,` +
		`"container":{"id":"container_bob","expires_at":"2026-12-02T15:00:00Z"},"usage":{"input_tokens":1,"output_tokens":1}}`
}

// anthropicFileStream is anthropicFileReply streamed: the result comes
// whole in its content_block_start.
const anthropicFileStream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_cf\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"container\":null,\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"srvtoolu_1\",\"name\":\"bash_code_execution\",\"input\":{}}}\n\n" +
	"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"command\\\":\\\"python plot.py\\\"}\"}}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
	"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":" + anthropicFileResult + "}\n\n" +
	"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n" +
	"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null,\"container\":{\"id\":\"container_bob\",\"expires_at\":\"2026-12-02T15:00:00Z\"}},\"usage\":{\"output_tokens\":1}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// TestStatesAnthropicFilesBound: with gateway keys and the operator's
// Anthropic key, the files a Messages reply's code execution wrote (the
// file_ids of its code execution results, in a whole reply however
// large, or in a stream's content_block_start) are bound to the caller
// with its container, and a request naming a file — a document's or an
// image's file source, a container_upload, the result sent back as
// history, in /v1/messages or in a token count — goes upstream only
// when it is the caller's: the provider would hand another tenant's
// file to the model. An id never given out is refused the same way; a
// client tool's input is no file.
func TestStatesAnthropicFilesBound(t *testing.T) {
	for _, variant := range []string{"whole", "streamed", "large"} {
		t.Run(variant, func(t *testing.T) {
			pad := ""
			if variant == "large" { // five text blocks of 1 MiB
				pad = strings.Repeat(`{"type":"text","text":"`+strings.Repeat("a", 1<<20)+`"},`, 5)
			}
			up := replyUpstream(t, "POST /v1/messages", anthropicFileReply(pad), anthropicFileStream, variant == "streamed")
			states := newFakeStates()
			g := anthropicGateway(t, up, states, "POST /v1/messages/count_tokens")
			h := map[string]string{"Authorization": "Bearer gw-key", "X-Memory-User": "bob"}
			first := `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"Plot it."}],` +
				`"tools":[{"type":"code_execution_20250825","name":"code_execution"}],"stream":` + map[bool]string{false: "false", true: "true"}[variant == "streamed"] + `}`
			resp, b := g.post(t, "/v1/messages", first, h)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %.300s", resp.StatusCode, b)
			}
			if variant == "large" && string(b) != anthropicFileReply(pad) {
				t.Errorf("the large reply was not relayed byte for byte (%d bytes)", len(b))
			}
			mustOwn(t, states, memory.ProviderState{Kind: memory.StateFile, ID: "file_bob"}, "a/bob")
			mustOwn(t, states, memory.ProviderState{Kind: memory.StateContainer, ID: "container_bob"}, "a/bob")
			msgs := func(blocks string) string {
				return `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":[` + blocks + `]}]}`
			}
			document := msgs(`{"type":"document","source":{"type":"file","file_id":"file_bob"}},{"type":"text","text":"Summarize it."}`)
			upload := msgs(`{"type":"container_upload","file_id":"file_bob"},{"type":"text","text":"Load it."}`)
			inTool := `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"Look."},` +
				`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"show","input":{"file_id":"file_never"}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"image","source":{"type":"file","file_id":"file_bob"}}]}]}]}`
			history := `{"model":"claude-sonnet-4-5","max_tokens":64,"container":"container_bob","messages":[{"role":"user","content":"Plot it."},` +
				`{"role":"assistant","content":[{"type":"server_tool_use","id":"srvtoolu_1","name":"bash_code_execution","input":{"command":"python plot.py"}},` + anthropicFileResult + `]},` +
				`{"role":"user","content":"Again."}]}`
			for _, body := range []string{document, upload, inTool, history} {
				if resp, b := g.post(t, "/v1/messages", body, h); resp.StatusCode != http.StatusOK {
					t.Errorf("the owner naming its file: %d %.300s in %s", resp.StatusCode, b, body)
				}
			}
			before := up.Calls()
			if _, _ = g.post(t, "/v1/messages/count_tokens", document, h); up.Calls() != before+1 {
				t.Error("the owner's token count naming its file did not reach the upstream")
			}
			for _, tt := range []struct{ user, path, body, id string }{
				{"eve", "/v1/messages", document, "file_bob"},
				{"eve", "/v1/messages", upload, "file_bob"},
				{"eve", "/v1/messages", inTool, "file_bob"},
				{"eve", "/v1/messages", strings.Replace(history, `"container":"container_bob",`, "", 1), "file_bob"},
				{"eve", "/v1/messages/count_tokens", document, "file_bob"},
				{"bob", "/v1/messages", strings.Replace(document, "file_bob", "file_never", 1), "file_never"},
				{"bob", "/v1/messages", strings.Replace(document, `"file_id":"file_bob"`, `"file_id":"file_never","file_id":"file_bob"`, 1), "file_never"},
			} {
				h["X-Memory-User"] = tt.user
				before := up.Calls()
				resp, b := g.post(t, tt.path, tt.body, h)
				if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(b), "File with id '"+tt.id+"' not found.") || !strings.Contains(string(b), `"type":"error"`) {
					t.Errorf("%s naming %s on %s: %d %s", tt.user, tt.id, tt.path, resp.StatusCode, b)
				}
				if up.Calls() != before {
					t.Errorf("%s naming %s on %s reached the upstream", tt.user, tt.id, tt.path)
				}
			}
		})
	}
}
