package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// fakeStates is an in-memory StateBinder; err fails every call.
type fakeStates struct {
	mu    sync.Mutex
	owner map[memory.ProviderState]string // tenant/user
	calls int
	err   error
}

func newFakeStates() *fakeStates { return &fakeStates{owner: map[memory.ProviderState]string{}} }

func (f *fakeStates) BindState(_ context.Context, b memory.StateBinding) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return f.err
	}
	for _, st := range b.States {
		if _, ok := f.owner[st]; !ok {
			f.owner[st] = b.Tenant + "/" + b.User
		}
	}
	return nil
}

func (f *fakeStates) BoundStates(_ context.Context, tenant, user string, sts []memory.ProviderState, _ time.Time) ([]bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	out := make([]bool, len(sts))
	for i, s := range sts {
		out[i] = f.owner[s] == tenant+"/"+user
	}
	return out, nil
}

func (f *fakeStates) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

var _ StateBinder = (*fakeStates)(nil)

// stateBodies are request bodies naming a provider state: a stored
// response, a conversation by id and by object.
var stateBodies = []string{
	`{"model":"gpt-4.1","previous_response_id":"resp_other","input":"hi"}`,
	`{"model":"gpt-4.1","conversation":"conv_other","input":"hi"}`,
	`{"model":"gpt-4.1","conversation":{"id":"conv_other"},"input":"hi"}`,
}

// TestStatesUnchangedWithoutSharedKey: without gateway keys, or when the
// client's own provider key goes upstream, a request naming a provider
// state goes upstream as before and nothing is checked or bound.
func TestStatesUnchangedWithoutSharedKey(t *testing.T) {
	key := identity.Key{Hash: identity.HashKey("gw-key"), Tenant: "a"}
	for _, tt := range []struct {
		name   string
		keys   []identity.Key
		apiKey string
		auth   string
	}{
		{"no gateway keys, upstream key", nil, "sk-operator", "Bearer sk-client"},
		{"no gateway keys, client's key", nil, "", "Bearer sk-client"},
		{"gateway keys, no upstream key", []identity.Key{key}, "", "Bearer gw-key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := upstreamtest.New(t, nil)
			states := newFakeStates()
			g := mustGateway(t, up, func(c *gatewayConfig) { c.Upstream.APIKey = tt.apiKey },
				Deps{Resolver: identity.New(tt.keys), States: states})
			for _, body := range append(stateBodies, `{"model":"gpt-4.1","input":"hi"}`) {
				before := up.Calls()
				resp, b := g.post(t, "/v1/responses", body, map[string]string{"Authorization": tt.auth, "X-Memory-User": "bob"})
				if resp.StatusCode != http.StatusOK || up.Calls() != before+1 {
					t.Errorf("%s: %d %s, upstream calls %d", body, resp.StatusCode, b, up.Calls()-before)
				}
			}
			if n := states.Calls(); n != 0 {
				t.Errorf("the state store was called %d times", n)
			}
		})
	}
}

// sharedGateway is a gateway with a gateway key for tenant a and an
// upstream key for every tenant, over states, forwarding passthrough.
func sharedGateway(t *testing.T, up *upstreamtest.Server, states StateBinder, passthrough ...string) *gateway {
	t.Helper()
	keys := []identity.Key{{Hash: identity.HashKey("gw-key"), Tenant: "a"}}
	return mustGateway(t, up, func(c *gatewayConfig) {
		c.Upstream.APIKey = "sk-operator"
		c.StateRetention = time.Hour
		c.Passthrough = passthrough
	}, Deps{Resolver: identity.New(keys), States: states})
}

// ownGateway is a gateway with a gateway key for tenant a and no
// upstream key: each caller brings its own.
func ownGateway(t *testing.T, up *upstreamtest.Server) *gateway {
	t.Helper()
	keys := []identity.Key{{Hash: identity.HashKey("gw-key"), Tenant: "a"}}
	return mustGateway(t, up, func(c *gatewayConfig) {}, Deps{Resolver: identity.New(keys), States: newFakeStates()})
}

// TestStatesFailClosed: with a shared upstream key, a request naming a
// provider state that the store cannot check (it fails, or there is
// none) is refused with a 503 and never reaches the upstream; a request
// naming none still goes through, its reply bound when the store can.
func TestStatesFailClosed(t *testing.T) {
	for _, tt := range []struct {
		name   string
		states StateBinder
	}{
		{"store down", &fakeStates{err: errors.New("connection refused")}},
		{"no store", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := upstreamtest.New(t, nil)
			g := sharedGateway(t, up, tt.states)
			h := map[string]string{"Authorization": "Bearer gw-key", "X-Memory-User": "bob"}
			for _, body := range stateBodies {
				resp, b := g.post(t, "/v1/responses", body, h)
				typ, code, _ := apiErrorBody(t, b)
				if resp.StatusCode != http.StatusServiceUnavailable || typ != "server_error" || code != "provider_state_unverifiable" {
					t.Errorf("%s: %d %s", body, resp.StatusCode, b)
				}
			}
			if up.Calls() != 0 {
				t.Errorf("the upstream got %d requests", up.Calls())
			}
			if resp, b := g.post(t, "/v1/responses", `{"model":"gpt-4.1","input":"hi"}`, h); resp.StatusCode != http.StatusOK {
				t.Errorf("a request naming no state: %d %s", resp.StatusCode, b)
			}
			g.waitMetric(t, `memgate_provider_states_total{outcome="unverifiable"} 3`)
			g.waitMetric(t, `memgate_provider_states_total{outcome="bind_failed"} 1`)
		})
	}
}

// TestStatesBoundFromReply: with a shared upstream key, the id of the
// upstream's reply — a whole JSON body, or a stream's response events —
// is bound to the tenant and user of the request, and only they may name
// it next.
func TestStatesBoundFromReply(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole", true: "streamed"}[stream], func(t *testing.T) {
			up := upstreamtest.New(t, nil)
			states := newFakeStates()
			g := sharedGateway(t, up, states)
			body := `{"model":"gpt-4.1","input":"hi"}`
			// upstreamtest's reply, whole or in ResponsesEvents.
			want := memory.ProviderState{Kind: memory.StateResponse, ID: "resp_test"}
			if stream {
				body = `{"model":"gpt-4.1","input":"hi","stream":true}`
			}
			h := map[string]string{"Authorization": "Bearer gw-key", "X-Memory-User": "bob"}
			if resp, b := g.post(t, "/v1/responses", body, h); resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			states.mu.Lock()
			owner := states.owner[want]
			states.mu.Unlock()
			if owner != "a/bob" {
				t.Fatalf("%v bound to %q, want a/bob (bindings %v)", want, owner, states.owner)
			}
			if item := (memory.ProviderState{Kind: memory.StateItem, ID: "msg_test"}); !stream && states.owner[item] != "a/bob" {
				t.Errorf("the reply's output item is not bound to a/bob (bindings %v)", states.owner)
			}
			cont := `{"model":"gpt-4.1","previous_response_id":"` + want.ID + `","input":"more"}`
			if resp, b := g.post(t, "/v1/responses", cont, h); resp.StatusCode != http.StatusOK {
				t.Errorf("the owner's continuation: %d %s", resp.StatusCode, b)
			}
			h["X-Memory-User"] = "eve"
			before := up.Calls()
			resp, b := g.post(t, "/v1/responses", cont, h)
			_, code, param := apiErrorBody(t, b)
			if resp.StatusCode != http.StatusBadRequest || code != "previous_response_not_found" || param != "previous_response_id" ||
				!strings.Contains(string(b), "Previous response with id '"+want.ID+"' not found.") || up.Calls() != before {
				t.Errorf("another user's continuation: %d %s (upstream calls %d)", resp.StatusCode, b, up.Calls()-before)
			}
		})
	}
}

// TestStatesStoreFalseBindsItsItems: of a response the provider is asked
// not to keep (store: false), no later request can name the response,
// which is bound to nobody; its output items, which a stateless client
// sends back with their ids (a reasoning item's following item is paired
// with it by id), are bound to the caller, so their ids go upstream as
// sent.
func TestStatesStoreFalseBindsItsItems(t *testing.T) {
	up := upstreamtest.New(t, nil)
	states := newFakeStates()
	g := sharedGateway(t, up, states)
	h := map[string]string{"Authorization": "Bearer gw-key", "X-Memory-User": "bob"}
	if resp, b := g.post(t, "/v1/responses", `{"model":"gpt-4.1","input":"hi","store":false}`, h); resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	states.mu.Lock()
	defer states.mu.Unlock()
	// upstreamtest's reply: response resp_test, output item msg_test.
	if owner := states.owner[memory.ProviderState{Kind: memory.StateItem, ID: "msg_test"}]; owner != "a/bob" {
		t.Errorf("the output item bound to %q, want a/bob (bindings %v)", owner, states.owner)
	}
	if owner, ok := states.owner[memory.ProviderState{Kind: memory.StateResponse, ID: "resp_test"}]; ok {
		t.Errorf("the response bound to %q, want nobody", owner)
	}
}

// TestStatesConversationItemsChecked: with a shared upstream key and the
// Conversations API allowed, the items a body puts in a conversation —
// creating it, or adding to it — may name stored items by id only when
// they are the caller's: the provider would copy another's into a
// conversation the caller then reads.
func TestStatesConversationItemsChecked(t *testing.T) {
	up := upstreamtest.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"conv_new","object":"conversation"}`))
	}))
	states := newFakeStates()
	mine := memory.ProviderState{Kind: memory.StateConversation, ID: "conv_bob"}
	states.owner[mine] = "a/bob"
	states.owner[memory.ProviderState{Kind: memory.StateItem, ID: "msg_alice"}] = "a/alice"
	states.owner[memory.ProviderState{Kind: memory.StateItem, ID: "msg_bob"}] = "a/bob"
	g := sharedGateway(t, up, states, "POST /v1/conversations", "POST /v1/conversations/*")
	h := map[string]string{"Authorization": "Bearer gw-key", "X-Memory-User": "bob"}
	for _, path := range []string{"/v1/conversations", "/v1/conversations/conv_bob/items"} {
		for _, items := range []string{`[{"type":"item_reference","id":"msg_alice"}]`, `[{"id":"msg_alice"}]`,
			`[{"type":"reasoning","id":"msg_alice","summary":[]}]`, `[{"type":"item_reference","id":"msg_alice","Type":"message"}]`} {
			before := up.Calls()
			resp, b := g.post(t, path, `{"items":`+items+`}`, h)
			if resp.StatusCode != http.StatusNotFound || up.Calls() != before {
				t.Errorf("%s %s: %d %s (upstream calls %d); want another's item refused", path, items, resp.StatusCode, b, up.Calls()-before)
			}
		}
		for _, body := range []string{`{"items":[{"type":"item_reference","id":"msg_bob"},{"type":"message","role":"user","content":"hi"}]}`, `{}`} {
			if resp, b := g.post(t, path, body, h); resp.StatusCode != http.StatusOK {
				t.Errorf("%s %s: %d %s; want the caller's own forwarded", path, body, resp.StatusCode, b)
			}
		}
	}
}

// TestStatesRepeatedMemberRefused: with a shared upstream key, an input
// item, a conversation object or a Conversations API item that gives a
// member twice is refused (400, the repeated key named) without reaching
// the upstream: memgate reads the last value, which may be the caller's,
// and the provider may read the first, another's. Without a shared key
// nothing is checked, and the body goes upstream as sent.
func TestStatesRepeatedMemberRefused(t *testing.T) {
	up := upstreamtest.New(t, nil)
	states := newFakeStates()
	for _, st := range []memory.ProviderState{{Kind: memory.StateItem, ID: "msg_alice"}, {Kind: memory.StateConversation, ID: "conv_alice"}} {
		states.owner[st] = "a/alice"
	}
	for _, st := range []memory.ProviderState{{Kind: memory.StateItem, ID: "msg_bob"}, {Kind: memory.StateConversation, ID: "conv_bob"}, {Kind: memory.StateContainer, ID: "cntr_bob"}} {
		states.owner[st] = "a/bob"
	}
	shared := sharedGateway(t, up, states, "POST /v1/conversations")
	own := ownGateway(t, up)
	h := map[string]string{"Authorization": "Bearer gw-key", "X-Memory-User": "bob"}
	for _, tt := range []struct{ path, body, param, key string }{
		{"/v1/responses", `{"model":"gpt-4.1","input":[{"type":"item_reference","id":"msg_alice","id":"msg_bob"}]}`, "input[0]", "id"},
		{"/v1/responses", `{"model":"gpt-4.1","input":[{"role":"user","content":"hi"},` +
			`{"type":"item_reference","type":"message","role":"user","content":"hi","id":"msg_alice"}]}`, "input[1]", "type"},
		{"/v1/responses", `{"model":"gpt-4.1","input":"hi","conversation":{"id":"conv_alice","id":"conv_bob"}}`, "conversation", "id"},
		{"/v1/responses", `{"model":"gpt-4.1","input":"hi","conversation":"conv_alice","conversation":"conv_bob"}`, "", "conversation"},
		{"/v1/responses", `{"model":"gpt-4.1","input":"hi","tools":[{"type":"code_interpreter","container":"cntr_alice","container":"cntr_bob"}]}`, "tools[0]", "container"},
		{"/v1/conversations", `{"items":[{"type":"item_reference","id":"msg_alice","id":"msg_bob"}]}`, "items[0]", "id"},
		{"/v1/conversations", `{"items":[{"type":"item_reference","id":"msg_alice"}],"items":[]}`, "", "items"},
	} {
		param := `"param":"` + tt.param + `"`
		if tt.param == "" { // the body
			param = `"param":null`
		}
		before := up.Calls()
		resp, b := shared.post(t, tt.path, tt.body, h)
		if resp.StatusCode != http.StatusBadRequest || up.Calls() != before ||
			!strings.Contains(string(b), param) || !strings.Contains(string(b), `the key \"`+tt.key+`\"`) {
			t.Errorf("%s %s: %d %s (upstream calls %d); want a 400 naming %s's repeated %q", tt.path, tt.body, resp.StatusCode, b, up.Calls()-before, tt.param, tt.key)
		}
		if tt.path != "/v1/responses" {
			continue
		}
		before = up.Calls()
		if resp, b := own.post(t, tt.path, tt.body, map[string]string{"Authorization": "Bearer gw-key", "X-Memory-User": "bob"}); resp.StatusCode != http.StatusOK || up.Calls() != before+1 {
			t.Errorf("%s without a shared key: %d %s (upstream calls %d); want it forwarded", tt.body, resp.StatusCode, b, up.Calls()-before)
		}
	}
}

// TestStatesInstructionItemsRefused: with a shared upstream key, a
// Responses body whose instructions are an array of items — which the
// API's request takes as a string only, and whose item references and
// ids memgate does not check as it checks the input's — is refused (400,
// param instructions) without reaching the upstream, on create and on
// the fixed sub-paths. A string goes through; without a shared key
// nothing is checked, and the body goes upstream as sent.
func TestStatesInstructionItemsRefused(t *testing.T) {
	up := upstreamtest.New(t, nil)
	states := newFakeStates()
	states.owner[memory.ProviderState{Kind: memory.StateItem, ID: "msg_alice"}] = "a/alice"
	shared := sharedGateway(t, up, states, "POST /v1/responses/*")
	own := ownGateway(t, up)
	h := map[string]string{"Authorization": "Bearer gw-key", "X-Memory-User": "bob"}
	for _, tt := range []struct{ path, body string }{
		{"/v1/responses", `{"model":"gpt-4.1","input":"hi","instructions":[{"type":"item_reference","id":"msg_alice"}]}`},
		{"/v1/responses", `{"model":"gpt-4.1","input":"hi","instructions":[{"type":"message","id":"msg_alice","role":"developer","content":"Be brief."}]}`},
		{"/v1/responses", `{"model":"gpt-4.1","input":"hi","instructions":[{"role":"developer","content":"Be brief."}]}`},
		{"/v1/responses/input_tokens", `{"model":"gpt-4.1","input":"hi","instructions":[{"type":"item_reference","id":"msg_alice"}]}`},
	} {
		before := up.Calls()
		resp, b := shared.post(t, tt.path, tt.body, h)
		if resp.StatusCode != http.StatusBadRequest || up.Calls() != before || !strings.Contains(string(b), `"param":"instructions"`) {
			t.Errorf("%s %s: %d %s (upstream calls %d); want a 400 naming instructions", tt.path, tt.body, resp.StatusCode, b, up.Calls()-before)
		}
		if tt.path != "/v1/responses" {
			continue
		}
		before = up.Calls()
		if resp, b := own.post(t, tt.path, tt.body, h); resp.StatusCode != http.StatusOK || up.Calls() != before+1 {
			t.Errorf("%s without a shared key: %d %s (upstream calls %d); want it forwarded", tt.body, resp.StatusCode, b, up.Calls()-before)
		}
	}
	before := up.Calls()
	if resp, b := shared.post(t, "/v1/responses", `{"model":"gpt-4.1","input":"hi","instructions":"Be brief."}`, h); resp.StatusCode != http.StatusOK || up.Calls() != before+1 {
		t.Errorf("string instructions with a shared key: %d %s (upstream calls %d); want it forwarded", resp.StatusCode, b, up.Calls()-before)
	}
}

// TestPathState: a passthrough path names the response or conversation
// of its first segment, except the Responses API's fixed sub-paths
// posted to, which name none.
func TestPathState(t *testing.T) {
	resp := func(id string) memory.ProviderState { return memory.ProviderState{Kind: memory.StateResponse, ID: id} }
	for _, tt := range []struct {
		method, path string
		want         memory.ProviderState
		ok           bool
	}{
		{http.MethodGet, "/v1/responses/resp_1", resp("resp_1"), true},
		{http.MethodPost, "/v1/responses/resp_1/cancel", resp("resp_1"), true},
		{http.MethodGet, "/v1/responses/resp_1/input_items", resp("resp_1"), true},
		{http.MethodGet, "/v1/conversations/conv_1/items", memory.ProviderState{Kind: memory.StateConversation, ID: "conv_1"}, true},
		{http.MethodPost, "/v1/responses/input_tokens", memory.ProviderState{}, false},
		{http.MethodPost, "/v1/responses/compact", memory.ProviderState{}, false},
		// Only posted to are they sub-paths; below them is an id.
		{http.MethodGet, "/v1/responses/compact", resp("compact"), true},
		{http.MethodPost, "/v1/responses/compact/x", resp("compact"), true},
		{http.MethodPost, "/v1/chat/completions", memory.ProviderState{}, false},
	} {
		if got, ok := pathState(tt.method, tt.path); got != tt.want || ok != tt.ok {
			t.Errorf("%s %s: %v, %v; want %v, %v", tt.method, tt.path, got, ok, tt.want, tt.ok)
		}
	}
}

// TestStatesReasoningWithEncryptedContent: a reasoning input item that
// carries its encrypted_content goes upstream whoever's its id is: the
// provider reads its content from encrypted_content, which it accepts
// only for the id it was issued for (see responses.reference), so the id
// reaches nothing stored. Without encrypted_content the provider reads
// the item it stored under the id, which must be the caller's.
func TestStatesReasoningWithEncryptedContent(t *testing.T) {
	up := upstreamtest.New(t, nil)
	states := newFakeStates()
	states.owner[memory.ProviderState{Kind: memory.StateItem, ID: "rs_alice"}] = "a/alice"
	g := sharedGateway(t, up, states)
	h := map[string]string{"Authorization": "Bearer gw-key", "X-Memory-User": "bob"}
	for _, tt := range []struct {
		item   string
		status int
	}{
		{`{"type":"reasoning","id":"rs_alice","summary":[],"encrypted_content":"gAAAA-bob"}`, http.StatusOK},
		{`{"type":"reasoning","id":"rs_never","summary":[],"encrypted_content":"gAAAA-bob"}`, http.StatusOK},
		{`{"type":"reasoning","id":"rs_alice","summary":[]}`, http.StatusNotFound},
		{`{"type":"reasoning","id":"rs_alice","summary":[],"encrypted_content":null}`, http.StatusNotFound},
		{`{"type":"reasoning","id":"rs_alice","summary":[],"encrypted_content":""}`, http.StatusNotFound},
	} {
		before := up.Calls()
		resp, b := g.post(t, "/v1/responses", `{"model":"gpt-4.1","store":false,"input":[`+tt.item+`,{"role":"user","content":"hi"}]}`, h)
		if resp.StatusCode != tt.status || (up.Calls() == before) != (tt.status != http.StatusOK) {
			t.Errorf("%s: %d %s (upstream calls %d), want %d", tt.item, resp.StatusCode, b, up.Calls()-before, tt.status)
		}
	}
}

// TestStatesCarriedIDsDropped: with a shared upstream key, an input item
// that gives its content and an id not bound to the caller — another's,
// or one never seen — goes upstream without the id, its content as sent,
// on every route whose body names items: a response created, the
// Responses API's fixed sub-paths, items put in a conversation. The
// caller's own ids go as sent, and a body with none to drop goes byte
// for byte. When the store cannot say, every such id is dropped and the
// request still goes through. Without a shared key nothing is dropped.
func TestStatesCarriedIDsDropped(t *testing.T) {
	items := `[{"type":"message","id":"msg_alice","role":"user","content":"hi"},` +
		`{"type":"function_call","call_id":"c1","id":"fc_bob","name":"f","arguments":"{}"},` +
		`{"type":"function_call_output","call_id":"c1","output":"ok","id":"fco_never"}]`
	bodies := map[string]string{
		"/v1/responses":                    `{"model":"gpt-4.1","input":` + items + `}`,
		"/v1/responses/input_tokens":       `{"model":"gpt-4.1","input":` + items + `}`,
		"/v1/conversations":                `{"items":` + items + `}`,
		"/v1/conversations/conv_bob/items": `{"items":` + items + `}`,
	}
	dropped := `[{"type":"message","role":"user","content":"hi"},` +
		`{"type":"function_call","call_id":"c1","id":"fc_bob","name":"f","arguments":"{}"},` +
		`{"type":"function_call_output","call_id":"c1","output":"ok"}]`
	allDropped := strings.Replace(dropped, `"id":"fc_bob",`, "", 1)
	keys := []identity.Key{{Hash: identity.HashKey("gw-key"), Tenant: "a"}}
	for _, tt := range []struct {
		name      string
		shared    bool
		storeDown bool
		want      string // the items upstream
	}{
		{"shared key", true, false, dropped},
		{"store down", true, true, allDropped},
		{"own key", false, false, items},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.Handle("POST /v1/responses", upstreamtest.Responses())
			mux.Handle("/", upstreamtest.JSON(http.StatusOK, `{"id":"conv_new","object":"conversation"}`))
			up := upstreamtest.New(t, mux)
			states := newFakeStates()
			states.owner[memory.ProviderState{Kind: memory.StateItem, ID: "msg_alice"}] = "a/alice"
			states.owner[memory.ProviderState{Kind: memory.StateItem, ID: "fc_bob"}] = "a/bob"
			states.owner[memory.ProviderState{Kind: memory.StateConversation, ID: "conv_bob"}] = "a/bob"
			g := mustGateway(t, up, func(c *gatewayConfig) {
				if tt.shared {
					c.Upstream.APIKey = "sk-operator"
				}
				c.StateRetention = time.Hour
				c.Passthrough = []string{"POST /v1/conversations", "POST /v1/conversations/*", "POST /v1/responses/*"}
			}, Deps{Resolver: identity.New(keys), States: states})
			h := map[string]string{"Authorization": "Bearer gw-key", "X-Memory-User": "bob"}
			for path, body := range bodies {
				if tt.storeDown && path == "/v1/conversations/conv_bob/items" {
					continue // its path names a state: refused when the store is down
				}
				states.mu.Lock()
				states.err = nil
				if tt.storeDown {
					states.err = errors.New("connection refused")
				}
				states.mu.Unlock()
				before := up.Calls()
				resp, b := g.post(t, path, body, h)
				if resp.StatusCode != http.StatusOK || up.Calls() != before+1 {
					t.Errorf("%s: %d %s (upstream calls %d)", path, resp.StatusCode, b, up.Calls()-before)
					continue
				}
				got := up.Requests()[before].Body
				if !strings.Contains(string(got), tt.want) {
					t.Errorf("%s: upstream got %s, want the items %s", path, got, tt.want)
				}
			}
			// Nothing to drop: the body byte for byte, the store asked
			// once for the item named by id and the carried one.
			own := `{ "model": "gpt-4.1", "input": [{"type":"item_reference","id":"msg_bob"},` +
				`{"type":"function_call","call_id":"c1","id":"fc_bob","name":"f","arguments":"{}"},` +
				`{"type":"function_call_output","call_id":"c1","output":"ok"}] }`
			states.mu.Lock()
			states.err = nil
			states.owner[memory.ProviderState{Kind: memory.StateItem, ID: "msg_bob"}] = "a/bob"
			states.mu.Unlock()
			before, asked := up.Calls(), states.Calls()
			if resp, b := g.post(t, "/v1/responses/input_tokens", own, h); resp.StatusCode != http.StatusOK || up.Calls() != before+1 ||
				string(up.Requests()[before].Body) != own {
				t.Errorf("the caller's own ids: %d %s, upstream got %s", resp.StatusCode, b, up.Requests()[len(up.Requests())-1].Body)
			}
			if n := states.Calls() - asked; tt.shared && n != 1 {
				t.Errorf("the store was asked %d times, want once", n)
			}
		})
	}
}

// TestStatesOneItemRetrieved: GET of one item of the caller's conversation
// is answered with the item alone, whose own output may be a string or an
// object, not a list of items: the reply names nothing to bind, and no
// binding is counted as failed (nor logged as one whose owner cannot name
// it again).
func TestStatesOneItemRetrieved(t *testing.T) {
	for _, item := range []string{
		`{"type":"function_call_output","id":"fco_1","call_id":"call_1","output":"42"}`,
		`{"type":"computer_call_output","id":"cuo_1","call_id":"call_1","output":{"type":"computer_screenshot","image_url":"data:"}}`,
	} {
		up := upstreamtest.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(item))
		}))
		states := newFakeStates()
		states.owner[memory.ProviderState{Kind: memory.StateConversation, ID: "conv_bob"}] = "a/bob"
		g := sharedGateway(t, up, states, "GET /v1/conversations/*")
		req, _ := http.NewRequest(http.MethodGet, g.URL+"/v1/conversations/conv_bob/items/call_item", nil)
		req.Header.Set("Authorization", "Bearer gw-key")
		req.Header.Set("X-Memory-User", "bob")
		if resp, b := do(t, req); resp.StatusCode != http.StatusOK || string(b) != item {
			t.Fatalf("%s: %d %s", item, resp.StatusCode, b)
		}
		if m := g.metrics(t); strings.Contains(m, `outcome="bind_failed"`) {
			t.Errorf("%s: a binding counted as failed:\n%s", item, grepLines(m, "memgate_provider_states"))
		}
	}
}

// TestStatesRequiredIDsChecked: with a shared upstream key, an input item
// whose id the API requires — a built-in tool call's (web_search_call,
// computer_call, mcp_call, …), which memgate cannot drop — or an MCP
// approval naming the approval request it answers, goes upstream only
// when that id is bound to the caller: another's, or one never seen, is
// refused with a 400 naming the member, without calling the upstream, on
// every route whose body names items. When the store cannot say, the
// request is refused (503). Without a shared key nothing is checked.
func TestStatesRequiredIDsChecked(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/responses", upstreamtest.Responses())
	mux.Handle("/", upstreamtest.JSON(http.StatusOK, `{"id":"conv_new","object":"conversation"}`))
	up := upstreamtest.New(t, mux)
	states := newFakeStates()
	for _, id := range []string{"ws_alice", "mcpr_alice", "cu_alice"} {
		states.owner[memory.ProviderState{Kind: memory.StateItem, ID: id}] = "a/alice"
	}
	for _, id := range []string{"ws_bob", "mcpr_bob", "conv_bob"} {
		kind := memory.StateItem
		if strings.HasPrefix(id, "conv_") {
			kind = memory.StateConversation
		}
		states.owner[memory.ProviderState{Kind: kind, ID: id}] = "a/bob"
	}
	const routes = "POST /v1/responses/*"
	shared := sharedGateway(t, up, states, routes, "POST /v1/conversations", "POST /v1/conversations/*")
	own := ownGateway(t, up)
	h := map[string]string{"Authorization": "Bearer gw-key", "X-Memory-User": "bob"}
	bodies := func(items string) map[string]string {
		return map[string]string{
			"/v1/responses":                    `{"model":"gpt-4.1","input":` + items + `}`,
			"/v1/responses/input_tokens":       `{"model":"gpt-4.1","input":` + items + `}`,
			"/v1/conversations":                `{"items":` + items + `}`,
			"/v1/conversations/conv_bob/items": `{"items":` + items + `}`,
		}
	}
	user := `{"role":"user","content":"hi"}`
	for _, tt := range []struct {
		item, member, id string
	}{
		{`{"type":"web_search_call","id":"ws_alice","status":"completed","action":{"type":"search","query":"pin"}}`, "id", "ws_alice"},
		{`{"type":"web_search_call","id":"ws_never","status":"completed"}`, "id", "ws_never"},
		{`{"type":"computer_call","id":"cu_alice","call_id":"c1","action":{"type":"screenshot"},"pending_safety_checks":[],"status":"completed"}`, "id", "cu_alice"},
		{`{"type":"file_search_call","id":"fs_alice","queries":["pin"],"status":"completed"}`, "id", "fs_alice"},
		{`{"type":"mcp_call","id":"mcp_alice","name":"f","arguments":"{}","server_label":"s"}`, "id", "mcp_alice"},
		{`{"type":"mcp_approval_response","approval_request_id":"mcpr_alice","approve":true}`, "approval_request_id", "mcpr_alice"},
		{`{"type":"image_generation_call","id":"ig_alice","result":null,"status":"completed"}`, "id", "ig_alice"},
	} {
		for path, body := range bodies(`[` + user + `,` + tt.item + `]`) {
			before := up.Calls()
			resp, b := shared.post(t, path, body, h)
			prefix := "input"
			if strings.HasPrefix(path, "/v1/conversations") {
				prefix = "items"
			}
			if want := prefix + "[1]." + tt.member; resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), `"param":"`+want+`"`) || up.Calls() != before ||
				!strings.Contains(string(b), "Item with id '"+tt.id+"' not found.") {
				t.Errorf("%s %s: %d %s (upstream calls %d); want a 400 naming %s", path, tt.item, resp.StatusCode, b, up.Calls()-before, want)
			}
		}
		before := up.Calls()
		if resp, b := own.post(t, "/v1/responses", `{"model":"gpt-4.1","input":[`+user+`,`+tt.item+`]}`, h); resp.StatusCode != http.StatusOK || up.Calls() != before+1 {
			t.Errorf("%s without a shared key: %d %s (upstream calls %d); want it forwarded", tt.item, resp.StatusCode, b, up.Calls()-before)
		}
	}
	// The caller's own ids go as sent, the store asked once.
	mine := `[` + user + `,{"type":"web_search_call","id":"ws_bob","status":"completed"},` +
		`{"type":"mcp_approval_response","id":"mcpa_never","approval_request_id":"mcpr_bob","approve":true}]`
	for path, body := range bodies(mine) {
		before, asked := up.Calls(), states.Calls()
		resp, b := shared.post(t, path, body, h)
		if resp.StatusCode != http.StatusOK || up.Calls() != before+1 {
			t.Errorf("%s the caller's own ids: %d %s", path, resp.StatusCode, b)
			continue
		}
		if got := string(up.Requests()[before].Body); !strings.Contains(got, `"id":"ws_bob"`) || !strings.Contains(got, `"approval_request_id":"mcpr_bob"`) ||
			strings.Contains(got, "mcpa_never") {
			t.Errorf("%s: upstream got %s, want the caller's ids as sent and the unbound optional id dropped", path, got)
		}
		if n := states.Calls() - asked; n != 1 && path == "/v1/responses/input_tokens" { // the others bind their replies
			t.Errorf("%s: the store was asked %d times, want once", path, n)
		}
	}
	// The store down: refused, never forwarded.
	states.mu.Lock()
	states.err = errors.New("connection refused")
	states.mu.Unlock()
	before := up.Calls()
	resp, b := shared.post(t, "/v1/responses", `{"model":"gpt-4.1","input":`+mine+`}`, h)
	if _, code, _ := apiErrorBody(t, b); resp.StatusCode != http.StatusServiceUnavailable || code != "provider_state_unverifiable" || up.Calls() != before {
		t.Errorf("store down: %d %s (upstream calls %d); want a 503", resp.StatusCode, b, up.Calls()-before)
	}
}

// TestStatesLargeReplyItemsBound: the items a whole JSON reply names are
// bound however large the reply (here past maxCaptureBytes: images in
// its output), read as it is relayed, each item no larger than
// maxCaptureBytes: the owner may name them next, another may not; the
// client gets the reply byte for byte. A reply with an item larger than
// that binds none past it (counted as failed) and is still relayed whole.
// A create reply that large binds its response and its items.
func TestStatesLargeReplyItemsBound(t *testing.T) {
	image := strings.Repeat("A", 3<<20)
	reply := `{"id":"resp_big","object":"response","status":"completed","output":[` +
		`{"id":"ig_1","type":"image_generation_call","status":"completed","result":"` + image + `"},` +
		`{"id":"ig_2","type":"image_generation_call","status":"completed","result":"` + image + `"},` +
		`{"id":"msg_big","type":"message","role":"assistant","content":[{"type":"output_text","text":"Two images."}]}],"usage":null}`
	huge := strings.Replace(reply, `"result":"`+image, `"result":"`+image+image, 1) // its first item past the bound
	for _, tt := range []struct {
		name, reply string
		bound       []string
	}{
		{"items within the bound", reply, []string{"ig_1", "ig_2", "msg_big"}},
		{"an item past the bound", huge, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := upstreamtest.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(tt.reply))
			}))
			states := newFakeStates()
			states.owner[memory.ProviderState{Kind: memory.StateResponse, ID: "resp_big"}] = "a/bob"
			g := sharedGateway(t, up, states, "GET /v1/responses/*")
			req, _ := http.NewRequest(http.MethodGet, g.URL+"/v1/responses/resp_big", nil)
			req.Header.Set("Authorization", "Bearer gw-key")
			req.Header.Set("X-Memory-User", "bob")
			if resp, b := do(t, req); resp.StatusCode != http.StatusOK || string(b) != tt.reply {
				t.Fatalf("%d, %d bytes; want the reply byte for byte", resp.StatusCode, len(b))
			}
			states.mu.Lock()
			for _, id := range []string{"ig_1", "ig_2", "msg_big"} {
				owner := states.owner[memory.ProviderState{Kind: memory.StateItem, ID: id}]
				if want := map[bool]string{true: "a/bob"}[slices.Contains(tt.bound, id)]; owner != want {
					t.Errorf("%s bound to %q, want %q", id, owner, want)
				}
			}
			states.mu.Unlock()
			if tt.bound == nil {
				g.waitMetric(t, `memgate_provider_states_total{outcome="bind_failed"} 1`)
			}
		})
	}
	// A create reply that large: its response and its items are the
	// caller's.
	up := upstreamtest.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(reply))
	}))
	states := newFakeStates()
	g := sharedGateway(t, up, states)
	h := map[string]string{"Authorization": "Bearer gw-key", "X-Memory-User": "bob"}
	if resp, b := g.post(t, "/v1/responses", `{"model":"gpt-4.1","input":"Draw two cats."}`, h); resp.StatusCode != http.StatusOK || string(b) != reply {
		t.Fatalf("create: %d, %d bytes; want the reply byte for byte", resp.StatusCode, len(b))
	}
	states.mu.Lock()
	defer states.mu.Unlock()
	for _, st := range []memory.ProviderState{{Kind: memory.StateResponse, ID: "resp_big"}, {Kind: memory.StateItem, ID: "ig_1"}, {Kind: memory.StateItem, ID: "msg_big"}} {
		if owner := states.owner[st]; owner != "a/bob" {
			t.Errorf("create: %v bound to %q, want a/bob", st, owner)
		}
	}
}

// imageStream is a streamed image generation's reply, as the Responses
// API sends it: the image_generation_call item ig_s announced, partial
// images, the item done with its image, a message, the terminal event
// listing both. done is the image item's output_item.done event's data.
func imageStream(partial, image, done string) string {
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	return ev("response.created", `{"type":"response.created","sequence_number":0,"response":{"id":"resp_s","object":"response","status":"in_progress","output":[]}}`) +
		ev("response.output_item.added", `{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"ig_s","type":"image_generation_call","status":"in_progress"}}`) +
		ev("response.image_generation_call.partial_image", `{"type":"response.image_generation_call.partial_image","sequence_number":2,"output_index":0,"item_id":"ig_s","partial_image_index":0,"partial_image_b64":"`+partial+`"}`) +
		ev("response.image_generation_call.partial_image", `{"type":"response.image_generation_call.partial_image","sequence_number":3,"output_index":0,"item_id":"ig_s","partial_image_index":1,"partial_image_b64":"`+partial+`"}`) +
		ev("response.output_item.done", done) +
		ev("response.output_item.added", `{"type":"response.output_item.added","sequence_number":5,"output_index":1,"item":{"id":"msg_s","type":"message","role":"assistant","status":"in_progress","content":[]}}`) +
		ev("response.output_item.done", `{"type":"response.output_item.done","sequence_number":6,"output_index":1,"item":{"id":"msg_s","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"A cat."}]}}`) +
		ev("response.completed", `{"type":"response.completed","sequence_number":7,"response":{"id":"resp_s","object":"response","status":"completed","output":[`+
			`{"id":"ig_s","type":"image_generation_call","status":"completed","result":"`+image+`"},`+
			`{"id":"msg_s","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"A cat."}]}]}}`)
}

// imageDone is the image item's output_item.done event's data.
func imageDone(image string) string {
	return `{"type":"response.output_item.done","sequence_number":4,"output_index":0,"item":{"id":"ig_s","type":"image_generation_call","status":"completed","result":"` + image + `"}}`
}

// TestStatesLargeStreamItemsBound: the output items a streamed reply
// names are bound however long the stream (here past maxCaptureBytes:
// partial images, the image, the terminal event repeating it), read
// event by event as it is relayed: the owner of a streamed image
// generation sends its image_generation_call back by id (multi-turn
// image editing), another user may not; the client gets the stream byte
// for byte. An event naming items larger than maxCaptureBytes stops the
// binding (fail closed: counted as failed), the items announced before
// it stay bound; an oversized event that names none (a partial image),
// or a finished item's (the image in output_item.done: its item was
// announced), is skipped, the items after it bound.
func TestStatesLargeStreamItemsBound(t *testing.T) {
	image := strings.Repeat("A", 3<<20)
	big := strings.Repeat("B", 5<<20) // past maxCaptureBytes
	for _, tt := range []struct {
		name, stream string
		bound        []string
		failed       bool
	}{
		{"events within the bound", imageStream(strings.Repeat("P", 1<<20), image, imageDone(image)), []string{"ig_s", "msg_s"}, false},
		{"a partial image past the bound", imageStream(big, image, imageDone(image)), []string{"ig_s", "msg_s"}, false},
		{"a finished item's event past the bound", imageStream("P", image, imageDone(big)), []string{"ig_s", "msg_s"}, false},
		{"an announcing item event past the bound", strings.Replace(imageStream("P", image, imageDone(image)),
			`"item":{"id":"msg_s","type":"message","role":"assistant","status":"in_progress","content":[]}`,
			`"item":{"id":"msg_s","type":"message","role":"assistant","status":"in_progress","content":[],"pad":"`+big+`"}`, 1), []string{"ig_s"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mux := http.NewServeMux()
			mux.Handle("POST /v1/responses", upstreamtest.Sequence(
				http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "text/event-stream")
					_, _ = w.Write([]byte(tt.stream))
				}),
				upstreamtest.Responses(), upstreamtest.Responses(), upstreamtest.Responses()))
			up := upstreamtest.New(t, mux)
			states := newFakeStates()
			g := sharedGateway(t, up, states)
			h := map[string]string{"Authorization": "Bearer gw-key", "X-Memory-User": "bob"}
			resp, b := g.post(t, "/v1/responses", `{"model":"gpt-4.1","input":"Draw a cat.","tools":[{"type":"image_generation","partial_images":2}],"stream":true}`, h)
			if resp.StatusCode != http.StatusOK || string(b) != tt.stream {
				t.Fatalf("%d, %d bytes (want %d); want the stream byte for byte", resp.StatusCode, len(b), len(tt.stream))
			}
			states.mu.Lock()
			for _, id := range []string{"ig_s", "msg_s"} {
				owner := states.owner[memory.ProviderState{Kind: memory.StateItem, ID: id}]
				if want := map[bool]string{true: "a/bob"}[slices.Contains(tt.bound, id)]; owner != want {
					t.Errorf("%s bound to %q, want %q", id, owner, want)
				}
			}
			if owner := states.owner[memory.ProviderState{Kind: memory.StateResponse, ID: "resp_s"}]; owner != "a/bob" {
				t.Errorf("the response bound to %q, want a/bob", owner)
			}
			states.mu.Unlock()
			if tt.failed {
				g.waitMetric(t, `memgate_provider_states_total{outcome="bind_failed"} 1`)
			}
			// Multi-turn image editing: the image item sent back by id.
			edit := `{"model":"gpt-4.1","input":[{"role":"user","content":"Make it blue."},` +
				`{"type":"image_generation_call","id":"ig_s","status":"completed","result":null}],"tools":[{"type":"image_generation"}]}`
			before := up.Calls()
			if resp, b := g.post(t, "/v1/responses", edit, h); resp.StatusCode != http.StatusOK || up.Calls() != before+1 {
				t.Errorf("the owner's edit: %d %s", resp.StatusCode, b)
			}
			h["X-Memory-User"] = "eve"
			before = up.Calls()
			resp, b = g.post(t, "/v1/responses", edit, h)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "Item with id 'ig_s' not found.") || up.Calls() != before {
				t.Errorf("another user's edit: %d %s (upstream calls %d); want a 400", resp.StatusCode, b, up.Calls()-before)
			}
		})
	}
}

// TestStatesStreamBoundPerRead: the states the events of one read of a
// stream name are bound in one write, before that read returns; read a
// byte at a time, each item is bound before the read completing the
// first event naming it returns.
func TestStatesStreamBoundPerRead(t *testing.T) {
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	var stream string
	ends := map[string]int{} // an id: the offset past the first event naming it
	for _, e := range []struct{ id, typ, data string }{
		{"resp_r", "response.created", `{"type":"response.created","response":{"id":"resp_r","output":[]}}`},
		{"rs_r", "response.output_item.added", `{"type":"response.output_item.added","item":{"id":"rs_r","type":"reasoning"}}`},
		{"", "response.output_item.done", `{"type":"response.output_item.done","item":{"id":"rs_r","type":"reasoning"}}`},
		{"ws_r", "response.output_item.added", `{"type":"response.output_item.added","item":{"id":"ws_r","type":"web_search_call"}}`},
		{"msg_r", "response.output_item.added", `{"type":"response.output_item.added","item":{"id":"msg_r","type":"message"}}`},
		{"fc_r", "response.completed", `{"type":"response.completed","response":{"id":"resp_r","output":[{"id":"rs_r"},{"id":"ws_r"},{"id":"msg_r"},{"id":"fc_r"}]}}`},
	} {
		stream += ev(e.typ, e.data)
		if e.id != "" {
			ends[e.id] = len(stream)
		}
	}
	for _, piece := range []int{len(stream), 1} {
		states := newFakeStates()
		g := sharedGateway(t, upstreamtest.New(t, nil), states)
		b := g.p.newBind(nil, memory.Identity{Tenant: "a", User: "bob"}, memory.StateResponse, time.Now())
		resp := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(strings.NewReader(stream))}
		if err := b.attach(context.Background(), resp); err != nil {
			t.Fatal(err)
		}
		read := 0
		for buf := make([]byte, piece); ; {
			n, err := resp.Body.Read(buf)
			read += n
			states.mu.Lock()
			for id, end := range ends {
				kind := memory.StateItem
				if id == "resp_r" {
					kind = memory.StateResponse
				}
				if owner := states.owner[memory.ProviderState{Kind: kind, ID: id}]; read >= end && owner != "a/bob" {
					t.Fatalf("pieces of %d: %s not bound after %d bytes read (its event ends at %d)", piece, id, read, end)
				}
			}
			states.mu.Unlock()
			if err == io.EOF {
				break
			}
		}
		if n := states.Calls(); piece == len(stream) && n != 1 {
			t.Errorf("read whole: %d writes, want one", n)
		}
	}
}
