package chat

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/dialect/body"
	"github.com/memgate/memgate/internal/memory"
)

const benchBody = `{"model":"gpt-4o-mini","temperature":0.2,"messages":[{"role":"system","content":"You are a helpful assistant."},` +
	`{"role":"user","content":"Tell me about the weather in Lisbon in spring."},{"role":"assistant","content":"It is mild and sunny."},` +
	`{"role":"user","content":"And in autumn?"}]}`

func TestParseReadsKnownFields(t *testing.T) {
	body := `{"model":"gpt-4o","user":"u1","stream":true,"stream_options":{"include_usage":true},"max_tokens":7,` +
		`"messages":[{"role":"user","content":"<hi>"}],"x":{"y":[1,2]}}`
	r, err := ParseRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if r.Model != "gpt-4o" || r.User != "u1" || !r.Stream || !r.IncludeUsage || r.MaxTokens != 7 || len(r.Messages) != 1 || r.Messages[0].Content != "<hi>" {
		t.Errorf("parsed %+v", r)
	}
	out, werr := r.WithMessages([]json.RawMessage{json.RawMessage(`{"role":"system","content":"a<b"}`), r.Messages[0].Raw})
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
		{"role in capitals", `{"messages":[{"role":"System","content":"obey"},{"role":"user","content":"b"}]}`, "messages[0].role"},
		{"role with a space", `{"messages":[{"role":"user","content":"a"},{"role":"user ","content":"b"}]}`, "messages[1].role"},
		{"role OpenAI does not define", `{"messages":[{"role":"critic","content":"a"}]}`, "messages[0].role"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseRequest([]byte(tt.body))
			var fe *body.FieldError
			if !errors.As(err, &fe) || fe.Param != tt.param || !errors.Is(err, memory.ErrInvalid) {
				t.Errorf("ParseRequest(%s) = %v, want a field error naming %q (a 400: see dialect.TestParse)", tt.body, err, tt.param)
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
		if _, err := ParseRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

// TestWithMessagesJoinsValuesAsSent checks that the rewritten body holds
// the same JSON value encoding/json would produce — keys needing escapes
// included — and keeps the client's other values byte for byte. (Stored
// messages that are not one JSON value never reach it: see the inject
// package's TestStoredMessagesNotOneValueLeftOut.)
func TestWithMessagesJoinsValuesAsSent(t *testing.T) {
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],` +
		`"odd \"key\" <&>":1, "é":2,"metadata": { "a" : [1, 2] },"messages":[{"role":"user","content":"last wins"}]}`
	r, perr := ParseRequest([]byte(body))
	if perr != nil {
		t.Fatal(perr)
	}
	msgs := []json.RawMessage{json.RawMessage(`{"role":"system","content":"memory <b> & \u003c"}`), r.Messages[0].Raw}
	out, err := r.WithMessages(msgs)
	if err != nil {
		t.Fatal(err)
	}
	var got, want any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("output %s: %v", out, err)
	}
	fields := map[string]any{}
	if err := json.Unmarshal([]byte(body), &fields); err != nil {
		t.Fatal(err)
	}
	var m []any
	for _, raw := range msgs {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		m = append(m, v)
	}
	fields["messages"] = m
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("WithMessages value:\n got %#v\nwant %#v", got, want)
	}
	if !strings.Contains(string(out), `"metadata":{ "a" : [1, 2] }`) {
		t.Errorf("client value not kept byte for byte: %s", out)
	}
}

// BenchmarkWithMessages measures rewriting a body whose prompt carries a
// large memory block.
func BenchmarkWithMessages(b *testing.B) {
	r, perr := ParseRequest([]byte(benchBody))
	if perr != nil {
		b.Fatal(perr)
	}
	block, err := json.Marshal(map[string]string{"role": "system", "content": strings.Repeat("- [2026-01-02] the user said something worth keeping\n", 400)})
	if err != nil {
		b.Fatal(err)
	}
	msgs := append([]json.RawMessage{r.Messages[0].Raw, block}, memory.Raws(r.Messages[1:])...)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.WithMessages(msgs); err != nil {
			b.Fatal(err)
		}
	}
}
