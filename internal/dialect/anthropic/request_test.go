package anthropic

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/dialect/body"
	"github.com/memgate/memgate/internal/dialect/dialecttest"
	"github.com/memgate/memgate/internal/memory"
)

// toolConversation is a Messages request with a string system prompt, an
// image, a tool round trip with thinking, a document and a cache_control
// block; formatting is the client's and must survive.
const toolConversation = `{
  "model": "claude-sonnet-4-5", "max_tokens": 1024, "stream": true,
  "metadata": {"user_id": "u-42"},
  "system": "You are a travel assistant.",
  "tools": [{"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
  "messages": [
    {"role": "user", "content": [
      {"type": "text", "text": "What is in this picture, and what's the weather there?"},
      {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    ]},
    {"role": "assistant", "content": [
      {"type": "thinking", "thinking": "The picture shows Porto.", "signature": "sig-1"},
      {"type": "text", "text": "That is Porto. "},
      {"type": "text", "text": "Let me check the weather."},
      {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Porto"}}
    ]},
    {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "toolu_01", "content": [{"type": "text", "text": "18C, sunny"}]},
      {"type": "text", "text": "And summarise this.", "cache_control": {"type": "ephemeral"}},
      {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "Porto is a city in Portugal."}, "title": "notes"}
    ]}
  ]
}`

func TestParseRequest(t *testing.T) {
	tests := []struct{ name, body string }{
		{"tool_conversation", toolConversation},
		{"string_content_block_system", `{"model":"claude-3-5-haiku-latest","max_tokens":10,
			"system":[{"type":"text","text":"Be brief."},{"type":"text","text":"Answer in French.","cache_control":{"type":"ephemeral"}}],
			"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Salut !"},{"role":"user","content":"Ça va ?"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			out, _ := json.Marshal(struct {
				Model     string            `json:"model"`
				Stream    bool              `json:"stream"`
				MaxTokens int               `json:"max_tokens"`
				User      string            `json:"user"`
				Messages  []json.RawMessage `json:"messages"`
				Texts     []string          `json:"texts"`
			}{r.Model, r.Stream, r.MaxTokens, r.User, memory.Raws(r.Messages), contents(r.Messages)})
			dialecttest.Golden(t, "parse_"+tt.name, out, *update)
		})
	}
}

func contents(ms []memory.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Role + ": " + m.Content
	}
	return out
}

func TestParseRequestRejects(t *testing.T) {
	tests := []struct{ body, param string }{
		{`[]`, ""},
		{`{"messages":[{"role":"user","content":"x"}]}`, "model"},
		{`{"model":"c","messages":[]}`, "messages"},
		{`{"model":"c","messages":"hi"}`, "messages"},
		{`{"model":"c","messages":[{"role":"system","content":"x"}]}`, "messages[0]"},
		{`{"model":"c","messages":[{"role":"user","content":42}]}`, "messages[0]"},
		{`{"model":"c","messages":[{"role":"user","content":[{"text":"no type"}]}]}`, "messages[0]"},
		{`{"model":"c","system":7,"messages":[{"role":"user","content":"x"}]}`, "system"},
		{`{"model":"c","stream":"yes","messages":[{"role":"user","content":"x"}]}`, "stream"},
		{`{"model":"c","max_tokens":"many","messages":[{"role":"user","content":"x"}]}`, "max_tokens"},
		{`{"model":"c","metadata":{"user_id":5},"messages":[{"role":"user","content":"x"}]}`, "metadata"},
	}
	for _, tt := range tests {
		_, err := ParseRequest([]byte(tt.body))
		var fe *body.FieldError
		if !errors.Is(err, memory.ErrInvalid) || !errors.As(err, &fe) || fe.Param != tt.param {
			t.Errorf("ParseRequest(%s) = %v, want an invalid-input error naming %q", tt.body, err, tt.param)
		}
	}
}

func TestRenderKeepsClientBytes(t *testing.T) {
	r, err := ParseRequest([]byte(toolConversation))
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Render(dialecttest.Prepared(r.Conversation, "## Memory\n- city: Porto", nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		System   string            `json:"system"`
		Messages []json.RawMessage `json:"messages"`
		Tools    json.RawMessage   `json:"tools"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.System != "You are a travel assistant.\n\n## Memory\n- city: Porto" {
		t.Errorf("system = %q", got.System)
	}
	for i, m := range got.Messages {
		if string(m) != string(r.messages[i]) {
			t.Errorf("message %d changed:\n got %s\nwant %s", i, m, r.messages[i])
		}
	}
	if !strings.Contains(string(out), `"tools":[{"name": "get_weather"`) {
		t.Errorf("tools not forwarded verbatim: %s", out)
	}
}
