package dialect

import (
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name      string
		api       API
		body      string
		user      string
		noRecent  bool
		msgs      int
		wantParam string // non-empty: a 400 naming it ("-": naming none)
	}{
		{"chat", Chat, `{"model":"gpt-4o","user":"bob","messages":[{"role":"user","content":"hi"}]}`, "bob", false, 1, ""},
		{"chat malformed", Chat, `{"messages":[`, "", false, 0, "-"},
		{"chat no messages", Chat, `{"model":"x"}`, "", false, 0, "messages"},
		{"chat bad message", Chat, `{"messages":[{"role":"user","content":"a"},{"content":"b"}]}`, "", false, 0, "messages[1]"},
		{"messages", Messages, `{"model":"claude-sonnet-4-6","max_tokens":5,"metadata":{"user_id":"bob"},"system":"S","messages":[{"role":"user","content":"hi"}]}`, "bob", false, 2, ""},
		{"messages opaque user id", Messages, `{"model":"claude-sonnet-4-6","metadata":{"user_id":"user 8f3a/session=9"},"messages":[{"role":"user","content":"hi"}]}`, "", false, 1, ""},
		{"messages bad", Messages, `{"model":"claude-sonnet-4-6","messages":[{"role":"user","content":5}]}`, "", false, 0, "messages[0]"},
		{"responses", Responses, `{"model":"gpt-4.1","user":"bob","instructions":"S","input":"hi"}`, "bob", false, 2, ""},
		{"responses chained", Responses, `{"model":"gpt-4.1","input":"hi","previous_response_id":"resp_1"}`, "", true, 1, ""},
		{"responses bad", Responses, `{"model":"gpt-4.1","input":{}}`, "", false, 0, "input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, aerr := Parse(tt.api, []byte(tt.body))
			if tt.wantParam != "" {
				want := strings.TrimPrefix(tt.wantParam, "-")
				if aerr == nil || aerr.Status != http.StatusBadRequest || aerr.Param != want {
					t.Fatalf("Parse = %v, want a 400 naming %q", aerr, tt.wantParam)
				}
				return
			}
			if aerr != nil {
				t.Fatal(aerr)
			}
			if r.User != tt.user || r.NoRecent != tt.noRecent || len(r.Messages) != tt.msgs || string(r.Raw) != tt.body {
				t.Errorf("parsed %+v", r)
			}
			h := http.Header{"X-Memory-Budget": {"300"}, "X-Memory-Cross": {"off"}}
			mreq, aerr := r.Memory(h, memory.Identity{Tenant: "t", User: "u"}, memory.ModeOn)
			if aerr != nil || mreq.Budget != 300 || mreq.CrossConversation || mreq.NoRecent != tt.noRecent || mreq.Model != r.Model {
				t.Errorf("memory request %+v, %v", mreq, aerr)
			}
			// Rendering the messages unchanged keeps the client's body.
			out, err := r.Render(memory.Prepared{Messages: memory.Raws(r.Messages)})
			if err != nil {
				t.Fatal(err)
			}
			if tt.api != Chat && string(out) != tt.body {
				t.Errorf("render of the unchanged prompt:\n got %s\nwant %s", out, tt.body)
			}
		})
	}
	if _, ok := ParseAPI("gemini"); ok {
		t.Error("ParseAPI accepted gemini")
	}
	if a, ok := ParseAPI(""); !ok || a != Chat {
		t.Errorf("ParseAPI(\"\") = %q, %v", a, ok)
	}
}
