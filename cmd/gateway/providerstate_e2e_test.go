package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/dialect/dialecttest"
	"github.com/memgate/memgate/internal/identity"
)

// serveSharedKey runs `gateway serve` with two gateway keys (tenants ta
// and tb), an admin key and one upstream key for both — the provider sees
// only the operator — in front of fake, with POST /v1/conversations and
// GET /v1/conversations/* allowed besides the stateless routes, and the
// routes on stored state: POST /v1/conversations/* (items added), GET
// /v1/responses/* (a response retrieved) and POST /v1/responses/* (its
// fixed sub-paths, input_tokens and compact).
func serveSharedKey(t *testing.T, fake *dialecttest.Upstream, extra string) string {
	t.Helper()
	cfg := "keys:\n" +
		"  - hash: " + identity.HashKey("key-a") + "\n    tenant: ta\n" +
		"  - hash: " + identity.HashKey("key-b") + "\n    tenant: tb\n" +
		"admin_key: admin-key\n" +
		"security:\n  passthrough:\n    - POST /v1/conversations\n    - GET /v1/conversations/*\n    - GET /v1/models\n" +
		"    - POST /v1/conversations/*\n    - GET /v1/responses/*\n    - POST /v1/responses/*\n" +
		"memory:\n  load_timeout: 10s\ncompaction:\n  enabled: false\n" + extra
	return serveConfigured(t, cfg, map[string]string{"GATEWAY_UPSTREAM_BASE_URL": fake.URL + "/v1", "GATEWAY_UPSTREAM_API_KEY": "sk-operator"})
}

// caller is a tenant's key and a memory user ("" for none).
type caller struct{ key, user string }

func (c caller) headers() map[string]string {
	h := map[string]string{"Authorization": "Bearer " + c.key}
	if c.user != "" {
		h["X-Memory-User"] = c.user
	}
	return h
}

// createResponse posts input as c and returns the response id, read from
// the JSON reply or, streamed, from its response.created event, and its
// first output item's id (the reply's, the response.completed event's).
func createResponse(t *testing.T, gw string, c caller, body string, stream bool) (id, item string) {
	t.Helper()
	if stream {
		body = strings.Replace(body, "{", `{"stream":true,`, 1)
	}
	status, b := postJSON(t, gw+"/v1/responses", body, c.headers())
	if status != http.StatusOK {
		t.Fatalf("create response as %v: %d %s", c, status, b)
	}
	type response struct {
		ID     string `json:"id"`
		Output []struct {
			ID string `json:"id"`
		} `json:"output"`
	}
	var r struct {
		response
		Type     string   `json:"type"`
		Response response `json:"response"`
	}
	if !stream {
		if err := json.Unmarshal(b, &r); err != nil || r.ID == "" || len(r.Output) == 0 {
			t.Fatalf("reply names no id: %v %s", err, b)
		}
		return r.ID, r.Output[0].ID
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || json.Unmarshal([]byte(data), &r) != nil {
			continue
		}
		switch {
		case r.Type == "response.created":
			id = r.Response.ID
		case r.Type == "response.completed" && len(r.Response.Output) > 0:
			item = r.Response.Output[0].ID
		}
	}
	if id == "" || item == "" {
		t.Fatalf("stream names no response or item: %s", b)
	}
	return id, item
}

// wantRefused posts body as c and checks the answer is status with param,
// code and message as the provider's for an unknown id, and that the
// upstream saw no request.
func wantRefused(t *testing.T, fake *dialecttest.Upstream, gw, path string, c caller, body string, status int, param, code, msg string) {
	t.Helper()
	before := len(fake.Requests())
	var got int
	var b []byte
	if body == "" {
		got, b = getAs(t, gw+path, c)
	} else {
		got, b = postJSON(t, gw+path, body, c.headers())
	}
	// OpenAI's error shape; param and code null when not given.
	var e struct {
		Error map[string]any `json:"error"`
	}
	orNil := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	if got != status || json.Unmarshal(b, &e) != nil || e.Error["message"] != msg || e.Error["type"] != "invalid_request_error" ||
		e.Error["param"] != orNil(param) || e.Error["code"] != orNil(code) {
		t.Errorf("%s as %v: %d %s, want %d %q (param %q, code %q)", path, c, got, b, status, msg, param, code)
	}
	if n := len(fake.Requests()); n != before {
		t.Errorf("%s as %v: the upstream got %d requests, want none", path, c, n-before)
	}
}

// TestProviderStateStaysWithItsTenant: with gateway keys and one upstream
// key for every tenant, a stored response (created whole or streamed),
// its output items named by id, or a conversation one tenant's user
// created is refused — as the provider
// refuses an unknown id, without calling it — to another tenant, to
// another user of the same tenant and to a request naming no user; the
// user who created it continues it. Run end to end: the real `gateway
// serve` with its SQLite store, in front of the dialecttest fake provider.
func TestProviderStateStaysWithItsTenant(t *testing.T) {
	fake := dialecttest.NewUpstream(t)
	gw := serveSharedKey(t, fake, "")
	ana := caller{"key-a", "ana"}
	others := []caller{{"key-b", "ana"}, {"key-a", "bob"}, {"key-a", ""}, {"key-b", ""}}

	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "whole", true: "streamed"}[stream]
		t.Run(name, func(t *testing.T) {
			id, item := createResponse(t, gw, ana, `{"model":"gpt-4.1","input":"My locker code is 4711."}`, stream)
			// The fake's own answer for an unknown id is what others get.
			msg := "Previous response with id '" + id + "' not found."
			cont := `{"model":"gpt-4.1","previous_response_id":"` + id + `","input":"What is my locker code?"}`
			for _, c := range others {
				wantRefused(t, fake, gw, "/v1/responses", c, cont, http.StatusBadRequest, "previous_response_id", "previous_response_not_found", msg)
			}
			status, b := postJSON(t, gw+"/v1/responses", cont, ana.headers())
			if status != http.StatusOK {
				t.Fatalf("the creator's continuation: %d %s", status, b)
			}
			last := fake.Requests()[len(fake.Requests())-1]
			if !bytes.Contains(last.Body, []byte(`"previous_response_id":"`+id+`"`)) || last.Header.Get("Authorization") != "Bearer sk-operator" {
				t.Errorf("upstream got %s with %q", last.Body, last.Header.Get("Authorization"))
			}
			// Its output items, named by id alone, are the creator's.
			ref := `{"model":"gpt-4.1","input":[{"type":"item_reference","id":"` + item + `"},{"role":"user","content":"And?"}]}`
			for _, c := range others {
				wantRefused(t, fake, gw, "/v1/responses", c, ref, http.StatusNotFound, "input", "", "Item with id '"+item+"' not found.")
			}
			if status, b := postJSON(t, gw+"/v1/responses", ref, ana.headers()); status != http.StatusOK {
				t.Fatalf("the creator's item reference: %d %s", status, b)
			}
			// The continuation's own response is the creator's too.
			next, _ := createResponse(t, gw, ana, `{"model":"gpt-4.1","previous_response_id":"`+id+`","input":"Thanks."}`, stream)
			wantRefused(t, fake, gw, "/v1/responses", others[0], `{"model":"gpt-4.1","previous_response_id":"`+next+`","input":"x"}`,
				http.StatusBadRequest, "previous_response_id", "previous_response_not_found", "Previous response with id '"+next+"' not found.")
		})
	}

	t.Run("conversation", func(t *testing.T) {
		status, b := postJSON(t, gw+"/v1/conversations", `{}`, ana.headers())
		var conv struct {
			ID string `json:"id"`
		}
		if status != http.StatusOK || json.Unmarshal(b, &conv) != nil || conv.ID == "" {
			t.Fatalf("create conversation: %d %s", status, b)
		}
		msg := "Conversation with id '" + conv.ID + "' not found."
		for _, form := range []string{`"` + conv.ID + `"`, `{"id":"` + conv.ID + `"}`} {
			body := `{"model":"gpt-4.1","conversation":` + form + `,"input":"hello"}`
			for _, c := range others {
				wantRefused(t, fake, gw, "/v1/responses", c, body, http.StatusNotFound, "conversation", "", msg)
			}
			if status, b := postJSON(t, gw+"/v1/responses", body, ana.headers()); status != http.StatusOK {
				t.Fatalf("the creator's conversation: %d %s", status, b)
			}
		}
		// A path naming it is refused to others as well.
		for _, c := range others {
			wantRefused(t, fake, gw, "/v1/conversations/"+conv.ID+"/items", c, "", http.StatusNotFound, "", "", msg)
		}
	})

	t.Run("unknown id", func(t *testing.T) {
		wantRefused(t, fake, gw, "/v1/responses", ana, `{"model":"gpt-4.1","previous_response_id":"resp_never","input":"x"}`,
			http.StatusBadRequest, "previous_response_id", "previous_response_not_found", "Previous response with id 'resp_never' not found.")
	})
}

// TestProviderStateErasedWithTheUser: erasing a user removes the user's
// provider state bindings: the user's next request naming a response they
// created before is refused as an unknown id.
func TestProviderStateErasedWithTheUser(t *testing.T) {
	fake := dialecttest.NewUpstream(t)
	gw := serveSharedKey(t, fake, "")
	ana := caller{"key-a", "ana"}
	id, _ := createResponse(t, gw, ana, `{"model":"gpt-4.1","input":"Remember me."}`, false)
	cont := `{"model":"gpt-4.1","previous_response_id":"` + id + `","input":"Who am I?"}`
	if status, b := postJSON(t, gw+"/v1/responses", cont, ana.headers()); status != http.StatusOK {
		t.Fatalf("continuation before the erasure: %d %s", status, b)
	}
	if status := apiCall(t, http.MethodDelete, gw+"/v1/memory/users/ana", map[string]string{"Authorization": "Bearer key-a"}, nil, nil); status != http.StatusOK {
		t.Fatalf("erase: %d", status)
	}
	wantRefused(t, fake, gw, "/v1/responses", ana, cont, http.StatusBadRequest, "previous_response_id", "previous_response_not_found",
		"Previous response with id '"+id+"' not found.")
}
