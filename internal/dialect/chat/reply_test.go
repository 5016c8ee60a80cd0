package chat

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// jsonEqual reports whether a and b encode the same JSON value.
func jsonEqual(tb testing.TB, a, b []byte) bool {
	tb.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		tb.Fatalf("unmarshal %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		tb.Fatalf("unmarshal %s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

// streamCase is one answer given both ways by the upstream.
type streamCase struct {
	name        string
	body        string   // non-streamed chat.completion
	chunks      []string // data: payloads of the streamed equivalent
	wantRaw     string
	wantContent string
	wantFinish  string
	wantUsage   *memory.Usage
}

var streamCases = []streamCase{
	{
		name: "text",
		body: `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, Ana!","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17,"prompt_tokens_details":{"cached_tokens":0}}}`,
		chunks: []string{
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":" there, "},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Ana!"},"logprobs":null,"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}`,
		},
		wantRaw:     `{"role":"assistant","content":"Hello there, Ana!"}`,
		wantContent: "Hello there, Ana!",
		wantFinish:  "stop",
		wantUsage:   &memory.Usage{PromptTokens: 12, CompletionTokens: 5, TotalTokens: 17},
	},
	{
		name: "parallel tool calls",
		body: `{"id":"chatcmpl-2","object":"chat.completion","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"Europe/Paris\"}"}}],"refusal":null,"annotations":[]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":80,"completion_tokens":40,"total_tokens":120}}`,
		chunks: []string{
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":null},"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"ci"}}]},"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":""}}]},"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\":\"Paris\"}"}}]},"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"tz\":"}}]},"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\"Europe/Paris\"}"}}]},"finish_reason":null}],"usage":null}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":null}`,
			`{"id":"chatcmpl-2","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":80,"completion_tokens":40,"total_tokens":120}}`,
		},
		wantRaw:     `{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"Europe/Paris\"}"}}]}`,
		wantContent: "[tool_call get_weather({\"city\":\"Paris\"})]\n[tool_call get_time({\"tz\":\"Europe/Paris\"})]",
		wantFinish:  "tool_calls",
		wantUsage:   &memory.Usage{PromptTokens: 80, CompletionTokens: 40, TotalTokens: 120},
	},
	{
		name: "text then tool call",
		body: `{"choices":[{"index":0,"message":{"role":"assistant","content":"Let me check.","tool_calls":[{"id":"call_x","type":"function","function":{"name":"lookup","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
		chunks: []string{
			`{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{"content":"Let me "},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{"content":"check."},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_x","type":"function","function":{"name":"lookup","arguments":"{}"}}]},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		},
		wantRaw:     `{"role":"assistant","content":"Let me check.","tool_calls":[{"id":"call_x","type":"function","function":{"name":"lookup","arguments":"{}"}}]}`,
		wantContent: "Let me check.\n[tool_call lookup({})]",
		wantFinish:  "tool_calls",
	},
	{
		name: "refusal",
		body: `{"choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}`,
		chunks: []string{
			`{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"refusal":""},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{"refusal":"I can't "},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{"refusal":"help with that."},"finish_reason":null}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		},
		wantRaw:     `{"role":"assistant","content":"","refusal":"I can't help with that."}`,
		wantContent: "I can't help with that.",
		wantFinish:  "stop",
	},
	{
		name: "n=2 keeps choice 0",
		body: `{"choices":[{"index":0,"message":{"role":"assistant","content":"A"},"finish_reason":"stop"},{"index":1,"message":{"role":"assistant","content":"B"},"finish_reason":"stop"}]}`,
		chunks: []string{
			`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}},{"index":1,"delta":{"role":"assistant","content":""}}]}`,
			`{"choices":[{"index":1,"delta":{"content":"B"}}]}`,
			`{"choices":[{"index":0,"delta":{"content":"A"}}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"},{"index":1,"delta":{},"finish_reason":"stop"}]}`,
		},
		wantRaw:     `{"role":"assistant","content":"A"}`,
		wantContent: "A",
		wantFinish:  "stop",
	},
}

func TestReplyFromJSONAndStreamAgree(t *testing.T) {
	for _, tc := range streamCases {
		t.Run(tc.name, func(t *testing.T) {
			whole, wholeUsage, err := ReplyFromJSON([]byte(tc.body))
			if err != nil {
				t.Fatalf("ReplyFromJSON: %v", err)
			}
			s := NewStreamReply()
			for _, c := range tc.chunks {
				if err := s.Add([]byte(c)); err != nil {
					t.Fatalf("Add(%s): %v", c, err)
				}
			}
			streamed, streamUsage, err := s.Result()
			if err != nil {
				t.Fatalf("Result: %v", err)
			}
			if !jsonEqual(t, whole.Raw, streamed.Raw) {
				t.Errorf("raw differs:\n non-stream %s\n stream     %s", whole.Raw, streamed.Raw)
			}
			if !jsonEqual(t, whole.Raw, []byte(tc.wantRaw)) {
				t.Errorf("raw = %s, want %s", whole.Raw, tc.wantRaw)
			}
			for _, m := range []memory.Message{whole, streamed} {
				if m.Role != "assistant" || m.Content != tc.wantContent {
					t.Errorf("message = %q %q, want assistant %q", m.Role, m.Content, tc.wantContent)
				}
			}
			if got := s.FinishReason(); got != tc.wantFinish {
				t.Errorf("finish reason = %q, want %q", got, tc.wantFinish)
			}
			if !reflect.DeepEqual(wholeUsage, tc.wantUsage) || !reflect.DeepEqual(streamUsage, tc.wantUsage) {
				t.Errorf("usage = %+v / %+v, want %+v", wholeUsage, streamUsage, tc.wantUsage)
			}
		})
	}
}

func TestReplyFromJSONRejects(t *testing.T) {
	for name, body := range map[string]string{
		"not json":   `{"choices":`,
		"no choices": `{"choices":[]}`,
		"null msg":   `{"choices":[{"index":0,"message":null}]}`,
		"msg string": `{"choices":[{"index":0,"message":"hi"}]}`,
		"error body": `{"error":{"message":"rate limited","type":"rate_limit"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, _, err := ReplyFromJSON([]byte(body)); !errors.Is(err, memory.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestStreamReplyRejects(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		addErr bool
	}{
		{name: "empty stream"},
		{name: "garbage chunk", chunks: []string{`not json`}, addErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStreamReply()
			var addErr error
			for _, c := range tc.chunks {
				if err := s.Add([]byte(c)); err != nil {
					addErr = err
				}
			}
			if tc.addErr != (addErr != nil) {
				t.Fatalf("Add err = %v, want error %v", addErr, tc.addErr)
			}
			if addErr != nil && !errors.Is(addErr, memory.ErrInvalid) {
				t.Fatalf("Add err = %v, want ErrInvalid", addErr)
			}
			if _, _, err := s.Result(); !errors.Is(err, memory.ErrInvalid) {
				t.Fatalf("Result err = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestStreamReplyCallsWithoutIndex(t *testing.T) {
	// Some OpenAI-compatible upstreams send each tool call whole, all at index 0.
	s := NewStreamReply()
	for _, c := range []string{
		`{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"a","arguments":"{}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"c2","type":"function","function":{"name":"b","arguments":"{\"x\":1}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	} {
		if err := s.Add([]byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	m, _, err := s.Result()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"a","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"b","arguments":"{\"x\":1}"}}]}`
	if !jsonEqual(t, m.Raw, []byte(want)) {
		t.Fatalf("raw = %s, want %s", m.Raw, want)
	}
}

func TestStreamReplyRepeatedToolName(t *testing.T) {
	// Some upstreams resend the id and name on every tool-call chunk.
	s := NewStreamReply()
	for _, c := range []string{
		`{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\""}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":":1}"}}]}}]}`,
	} {
		if err := s.Add([]byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	m, _, err := s.Result()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}`
	if !jsonEqual(t, m.Raw, []byte(want)) {
		t.Fatalf("raw = %s, want %s", m.Raw, want)
	}
	if !strings.Contains(m.Content, `f({"a":1})`) {
		t.Fatalf("content = %q", m.Content)
	}
}
