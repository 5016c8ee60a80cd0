package main

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/memgate/memgate/internal/dialect/dialecttest"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestBodyUserValueIsOneUserOnEveryAPI: an app that names its users in
// the body with values that are not memgate ids ("John Smith" as chat's
// and Responses' user and as Anthropic's metadata.user_id) gets memory
// for each of them — one user across the three APIs, apart from another
// such user — and the operator erases that user by the app's value
// through the management API. Run end to end: `gateway serve` on SQLite
// in front of a chat upstream and the dialecttest provider.
func TestBodyUserValueIsOneUserOnEveryAPI(t *testing.T) {
	fake := dialecttest.NewUpstream(t)
	openai := upstreamtest.New(t, chatAndResponses(fake, upstreamtest.Chat(upstreamtest.Reply{Content: "Noted."})))
	gw := serveDialects(t, openai.URL(), fake.URL+"/v1")
	conv := func(c string) map[string]string {
		return map[string]string{"Authorization": "Bearer sk-test", "X-Api-Key": "sk-ant-test", "Anthropic-Version": "2023-06-01", "X-Memory-Conversation": c}
	}
	for _, r := range []struct{ path, body, conv string }{
		{"/v1/chat/completions", `{"model":"local-model","user":"John Smith","messages":[{"role":"user","content":"My dog is Rex."}]}`, "c1"},
		{"/v1/messages", `{"model":"claude-sonnet-4-6","max_tokens":64,"metadata":{"user_id":"John Smith"},"messages":[{"role":"user","content":"I live in Porto."}]}`, "c2"},
		{"/v1/responses", `{"model":"gpt-4.1","user":"John Smith","input":"I like tea."}`, "c3"},
		{"/v1/chat/completions", `{"model":"local-model","user":"Jane Smith","messages":[{"role":"user","content":"My cat is Tom."}]}`, "c1"},
	} {
		if status, b := postJSON(t, gw+r.path, r.body, conv(r.conv)); status != 200 {
			t.Fatalf("%s: %d %s", r.path, status, b)
		}
	}
	conversations := func(user string) int {
		var list struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if st := apiCall(t, http.MethodGet, gw+"/v1/memory/conversations?user="+url.QueryEscape(user), nil, nil, &list); st != 200 {
			t.Fatalf("conversations of %q: %d", user, st)
		}
		return len(list.Data)
	}
	eventually(t, "John Smith's three conversations and Jane Smith's one", func() bool {
		return conversations("John Smith") == 3 && conversations("Jane Smith") == 1
	})
	if n := conversations(memory.BodyUserID("John Smith")); n != 3 {
		t.Errorf("John Smith's conversations by the digest id: %d, want 3", n)
	}

	var erased struct {
		User string `json:"user"`
	}
	if st := apiCall(t, http.MethodDelete, gw+"/v1/memory/users/"+url.PathEscape("John Smith"), nil, nil, &erased); st != 200 ||
		erased.User != memory.BodyUserID("John Smith") {
		t.Fatalf("erase John Smith: %d, user %q", st, erased.User)
	}
	if n := conversations("John Smith"); n != 0 {
		t.Errorf("John Smith has %d conversations after the erasure", n)
	}
	if n := conversations("Jane Smith"); n != 1 {
		t.Errorf("Jane Smith has %d conversations after John Smith's erasure, want 1", n)
	}
}
