package chatreq

import (
	"encoding/json"
	"testing"
)

const benchBody = `{"model":"gpt-4o-mini","temperature":0.2,"messages":[{"role":"system","content":"You are a helpful assistant."},` +
	`{"role":"user","content":"Tell me about the weather in Lisbon in spring."},{"role":"assistant","content":"It is mild and sunny."},` +
	`{"role":"user","content":"And in autumn?"}]}`

func TestParseReadsKnownFields(t *testing.T) {
	body := `{"model":"gpt-4o","user":"u1","stream":true,"stream_options":{"include_usage":true},"max_tokens":7,` +
		`"messages":[{"role":"user","content":"<hi>"}],"x":{"y":[1,2]}}`
	r, err := Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if r.Model != "gpt-4o" || r.User != "u1" || !r.Stream || !r.IncludeUsage || r.MaxTokens != 7 || len(r.Parsed) != 1 || r.Parsed[0].Content != "<hi>" {
		t.Errorf("parsed %+v", r)
	}
	out, werr := r.WithMessages([]json.RawMessage{json.RawMessage(`{"role":"system","content":"a<b"}`), r.Messages[0]})
	if werr != nil {
		t.Fatal(werr)
	}
	want := `{"max_tokens":7,"messages":[{"role":"system","content":"a<b"},{"role":"user","content":"<hi>"}],"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true},"user":"u1","x":{"y":[1,2]}}`
	if string(out) != want {
		t.Errorf("WithMessages:\n got %s\nwant %s", out, want)
	}
}

func TestParseRejects(t *testing.T) {
	tests := []struct{ name, body, param string }{
		{"malformed", `{"messages":[`, ""},
		{"trailing garbage", `{"messages":[{"role":"user","content":"a"}]} x`, ""},
		{"not an object", `[1]`, ""},
		{"null", `null`, ""},
		{"no messages", `{"model":"x"}`, "messages"},
		{"messages null", `{"messages":null}`, "messages"},
		{"messages object", `{"messages":{}}`, "messages"},
		{"messages empty", `{"messages":[]}`, "messages"},
		{"bad message", `{"messages":[{"role":"user","content":"a"},{"content":"b"}]}`, "messages[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.body))
			if err == nil || err.Status != 400 || err.Param != tt.param {
				t.Errorf("Parse(%s) = %v, want 400 naming %q", tt.body, err, tt.param)
			}
		})
	}
}

// BenchmarkParse measures reading a chat body: the top-level fields, the
// messages array and every message with memory.ParseMessage.
func BenchmarkParse(b *testing.B) {
	body := []byte(benchBody)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(body); err != nil {
			b.Fatal(err)
		}
	}
}
