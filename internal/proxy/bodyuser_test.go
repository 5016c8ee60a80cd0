package proxy

import (
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestBodyUserNamesItsOwnMemory: on every API, a body's user value that
// is not a memgate id (a name with a space, a braced UUID, a base64 hash
// — what apps put in user, safety_identifier or metadata.user_id) turns
// memory on for a user of its own, memory.BodyUserID's digest of it: the
// request goes through (no 400), two such values are two users (not one
// merged memory), and the same value is the same user on the three APIs.
// The explicit X-Memory-User header stays strict: a 400.
func TestBodyUserNamesItsOwnMemory(t *testing.T) {
	const (
		chatMsgs  = `"messages":[{"role":"user","content":"hi"}]`
		claudeMsg = `"model":"claude-sonnet-4-6","max_tokens":5,"messages":[{"role":"user","content":"hi"}]`
	)
	reqs := make(chan memory.Request, 1)
	up := upstreamtest.New(t, nil)
	chat := mustGateway(t, up, nil, Deps{Resolver: identity.New(nil), Preparer: injecting(reqs)})
	dialects, _ := dialectGateway(t, rememberingPreparer(reqs), nil, nil)
	claude := map[string]string{"X-Api-Key": "sk-ant-client", "Anthropic-Version": "2023-06-01"}
	openai := map[string]string{"Authorization": "Bearer sk-client"}
	for _, tc := range []struct {
		name, path, body, value string
		g                       *gateway
		header                  map[string]string
	}{
		{"chat user", "/v1/chat/completions", `{"model":"gpt-4o","user":"John Smith",` + chatMsgs + `}`, "John Smith", chat, nil},
		{"chat another user", "/v1/chat/completions", `{"model":"gpt-4o","user":"Jane Smith",` + chatMsgs + `}`, "Jane Smith", chat, nil},
		{"chat safety identifier", "/v1/chat/completions", `{"model":"gpt-4o","safety_identifier":"aGk/+w==",` + chatMsgs + `}`, "aGk/+w==", chat, nil},
		{"chat user too long", "/v1/chat/completions", `{"model":"gpt-4o","user":"` + longID + `",` + chatMsgs + `}`, longID, chat, nil},
		{"responses user", "/v1/responses", `{"model":"gpt-4.1","user":"John Smith","input":"hi"}`, "John Smith", dialects, openai},
		{"responses braced uuid", "/v1/responses", `{"model":"gpt-4.1","user":"{3F2504E0-4F89-11D3-9A0C-0305E82C3301}","input":"hi"}`, "{3F2504E0-4F89-11D3-9A0C-0305E82C3301}", dialects, openai},
		{"responses safety identifier", "/v1/responses", `{"model":"gpt-4.1","safety_identifier":"a b","input":"hi"}`, "a b", dialects, openai},
		{"messages user id", "/v1/messages", `{` + claudeMsg + `,"metadata":{"user_id":"John Smith"}}`, "John Smith", dialects, claude},
		{"messages opaque user id", "/v1/messages", `{` + claudeMsg + `,"metadata":{"user_id":"user 8f3a/session=9"}}`, "user 8f3a/session=9", dialects, claude},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := tc.g.post(t, tc.path, tc.body, tc.header)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			req := wait(t, reqs, "Prepare")
			if want := memory.BodyUserID(tc.value); req.User != want || !memory.ValidID(req.User) || req.User == tc.value {
				t.Errorf("memory user %q, want %q (the digest of %q)", req.User, want, tc.value)
			}
		})
	}
	if memory.BodyUserID("John Smith") == memory.BodyUserID("Jane Smith") {
		t.Error("two body users share a memory")
	}

	resp, b := chat.post(t, "/v1/chat/completions", `{"model":"gpt-4o",`+chatMsgs+`}`, map[string]string{"X-Memory-User": "John Smith"})
	if resp.StatusCode != 400 {
		t.Fatalf("X-Memory-User: John Smith: status %d: %s", resp.StatusCode, b)
	}
	if _, _, param := apiErrorBody(t, b); param != identity.HeaderUser || !strings.Contains(string(b), memory.IDChars) {
		t.Errorf("X-Memory-User: John Smith: %s, want an error naming the header and what an id is", b)
	}
}

// longID is a valid id's characters, one more than an id may hold.
var longID = strings.Repeat("a", 129)
