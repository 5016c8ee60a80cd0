package upstreamtest

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/dialect/chat"
)

func post(t *testing.T, url, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestRecordsRequests(t *testing.T) {
	s := New(t, nil)
	req, _ := http.NewRequest("POST", s.URL()+"/embeddings?x=1", strings.NewReader(`{"input":"hi"}`))
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got := s.Last(t)
	if got.Method != "POST" || got.Path != "/v1/embeddings" || got.RawQuery != "x=1" ||
		got.Header.Get("Authorization") != "Bearer k" || string(got.Body) != `{"input":"hi"}` || s.Calls() != 1 {
		t.Errorf("recorded %+v", got)
	}
}

// TestChatWireFormat checks that the JSON and the streamed form of a reply
// carry the same assistant message, as capture reassembles it.
func TestChatWireFormat(t *testing.T) {
	tests := []struct {
		name  string
		reply Reply
	}{
		{"text", Reply{Content: "Hello there, friend."}},
		{"parallel tool calls", Reply{ToolCalls: []ToolCall{{ID: "c1", Name: "a", Arguments: `{"x":1}`}, {ID: "c2", Name: "b", Arguments: `{"y":"z"}`}}}},
		{"text and tool call", Reply{Content: "Checking.", ToolCalls: []ToolCall{{ID: "c1", Name: "a", Arguments: `{}`}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(t, Chat(tt.reply))
			_, body := post(t, s.URL()+"/chat/completions", `{"model":"m","messages":[]}`)
			want, wantUsage, err := chat.ReplyFromJSON([]byte(body))
			if err != nil {
				t.Fatalf("ReplyFromJSON(%s): %v", body, err)
			}
			resp, stream := post(t, s.URL()+"/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[]}`)
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("content type %q", ct)
			}
			if !strings.HasSuffix(stream, "data: [DONE]\n\n") {
				t.Errorf("stream does not end with [DONE]: %q", stream)
			}
			sr := chat.NewStreamReply()
			for _, line := range strings.Split(stream, "\n") {
				p, ok := strings.CutPrefix(line, "data: ")
				if !ok || p == "[DONE]" {
					continue
				}
				if err := sr.Add([]byte(p)); err != nil {
					t.Fatalf("Add(%s): %v", p, err)
				}
			}
			got, gotUsage, err := sr.Result()
			if err != nil {
				t.Fatal(err)
			}
			if got.Content != want.Content || !jsonEqual(t, got.Raw, want.Raw) {
				t.Errorf("streamed message %s, JSON message %s", got.Raw, want.Raw)
			}
			if gotUsage == nil || wantUsage == nil || *gotUsage != *wantUsage {
				t.Errorf("usage streamed %v, JSON %v", gotUsage, wantUsage)
			}
		})
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		t.Fatalf("not JSON: %s / %s", a, b)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

func TestSequenceAndErrors(t *testing.T) {
	s := New(t, Sequence(RateLimited("3"), Error(503, "server_error", "", "down"), Chat(DefaultReply)))
	tests := []struct {
		status     int
		retryAfter string
		body       string
	}{
		{429, "3", `"code":"rate_limit_exceeded"`},
		{503, "", `"message":"down","type":"server_error","param":null,"code":null`},
		{200, "", `"object":"chat.completion"`},
		{200, "", `"object":"chat.completion"`},
	}
	for i, tt := range tests {
		resp, body := post(t, s.URL()+"/chat/completions", `{"model":"m"}`)
		if resp.StatusCode != tt.status || resp.Header.Get("Retry-After") != tt.retryAfter || !strings.Contains(body, tt.body) {
			t.Errorf("call %d: %d Retry-After %q body %s", i, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
}

func TestDefaultRoutes(t *testing.T) {
	s := New(t, nil)
	resp, err := http.Get(s.URL() + "/models")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("models: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, body := post(t, s.URL()+"/responses", `{"stream":true}`)
	if resp.Header.Get("Content-Type") != "text/event-stream" || !strings.Contains(body, "event: response.completed\n") {
		t.Errorf("responses stream %q", body)
	}
	if resp, _ := post(t, s.URL()+"/nope", `{}`); resp.StatusCode != 404 {
		t.Errorf("unknown route %d", resp.StatusCode)
	}
}

func TestFeed(t *testing.T) {
	f := NewFeed()
	s := New(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", s.URL()+"/chat/completions", strings.NewReader(`{}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	select {
	case <-f.Started():
	case <-time.After(5 * time.Second):
		t.Fatal("feed never started")
	}
	br := bufio.NewReader(resp.Body)
	f.Send(t, `{"n":1}`)
	if line, _ := br.ReadString('\n'); line != "data: {\"n\":1}\n" {
		t.Fatalf("line %q", line)
	}
	cancel()
	select {
	case <-f.Canceled():
	case <-time.After(5 * time.Second):
		t.Fatal("feed did not see the cancellation")
	}
}

// TestChatRejectsBrokenToolCalls proves the chat fake's rule check bites:
// a tool message without its call, a call without its result, a call id
// given twice (on two turns, or twice in one message); and that it lets a
// well-formed tool loop through.
func TestChatRejectsBrokenToolCalls(t *testing.T) {
	s := New(t, Chat(DefaultReply))
	const (
		call = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function","function":{"name":"f","arguments":"{}"}}]}`
		res  = `{"role":"tool","tool_call_id":"call_0","content":"x"}`
		user = `{"role":"user","content":"a"}`
	)
	for _, tc := range []struct {
		msgs string
		ok   bool
	}{
		{`[` + user + `,` + call + `,` + res + `,` + user + `]`, true},
		{`[` + user + `,` + res + `]`, false},
		{`[` + user + `,` + call + `,` + user + `]`, false},
		{`[` + user + `,` + call + `,` + res + `,` + res + `]`, false},
		{`[` + user + `,` + call + `,` + res + `,` + user + `,` + call + `,` + res + `]`, false},
		{`[` + user + `,{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
			`{"role":"tool","tool_call_id":"c","content":"x"},{"role":"tool","tool_call_id":"c","content":"y"}]`, false},
	} {
		resp, b := post(t, s.URL()+"/chat/completions", `{"model":"m","messages":`+tc.msgs+`}`)
		if ok := resp.StatusCode == 200; ok != tc.ok || (!ok && (resp.StatusCode != 400 || !strings.Contains(b, `"invalid_request_error"`))) {
			t.Errorf("%s: %d %s, want accepted %v", tc.msgs, resp.StatusCode, b, tc.ok)
		}
	}
}

func TestRequireTools(t *testing.T) {
	s := New(t, RequireTools(Chat(DefaultReply)))
	const (
		tools = `"tools":[{"type":"function","function":{"name":"f"}}],`
		call  = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function","function":{"name":"f","arguments":"{}"}}]}`
		res   = `{"role":"tool","tool_call_id":"call_0","content":"x"}`
		user  = `{"role":"user","content":"a"}`
	)
	for _, tc := range []struct {
		name, body string
		ok         bool
	}{
		{"text without tools", `{"model":"m","messages":[` + user + `]}`, true},
		{"tool turn with tools", `{"model":"m",` + tools + `"messages":[` + user + `,` + call + `,` + res + `,` + user + `]}`, true},
		{"tool turn with functions", `{"model":"m","functions":[{"name":"f"}],"messages":[` + user + `,` + call + `,` + res + `,` + user + `]}`, true},
		{"tool turn without tools", `{"model":"m","messages":[` + user + `,` + call + `,` + res + `,` + user + `]}`, false},
		{"tool turn with no tools", `{"model":"m","tools":[],"messages":[` + user + `,` + call + `,` + res + `,` + user + `]}`, false},
		{"function call without tools", `{"model":"m","messages":[` + user + `,{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}},{"role":"function","name":"f","content":"x"},` + user + `]}`, false},
		{"anthropic tool blocks without tools", `{"model":"m","messages":[` + user + `,{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"}]}]}`, false},
		{"responses items without tools", `{"model":"m","messages":[` + user + `],"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]}`, false},
	} {
		resp, b := post(t, s.URL()+"/chat/completions", tc.body)
		if ok := resp.StatusCode == 200; ok != tc.ok || (!ok && (resp.StatusCode != 400 || !strings.Contains(b, NoToolConfigMessage))) {
			t.Errorf("%s: %d %s, want accepted %v", tc.name, resp.StatusCode, b, tc.ok)
		}
	}
}

func TestRequireAlternation(t *testing.T) {
	s := New(t, RequireAlternation(Chat(DefaultReply)))
	const (
		sys   = `{"role":"system","content":"s"}`
		user  = `{"role":"user","content":"a"}`
		asst  = `{"role":"assistant","content":"b"}`
		call  = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}`
		res0  = `{"role":"tool","tool_call_id":"call_0","content":"x"}`
		res1  = `{"role":"tool","tool_call_id":"call_1","content":""}`
		fcall = `{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{}"}}`
		fres  = `{"role":"function","name":"f","content":"x"}`
	)
	for _, tc := range []struct {
		name, messages string
		ok             bool
	}{
		{"alternating", sys + `,` + user + `,` + asst + `,` + user, true},
		{"tool loop", user + `,` + call + `,` + res0 + `,` + res1 + `,` + asst + `,` + user, true},
		{"function loop", user + `,` + fcall + `,` + fres + `,` + asst, true},
		{"anthropic blocks", user + `,{"role":"assistant","content":[{"type":"text","text":"b"}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"x"},{"type":"text","text":"c"}]}`, true},
		{"two assistants", user + `,` + asst + `,` + asst + `,` + user, false},
		{"two users", user + `,` + user + `,` + asst, false},
		{"a user after results", user + `,` + call + `,` + res0 + `,` + user, false},
		{"assistant first", sys + `,` + asst + `,` + user, false},
		{"a system message later", user + `,` + sys + `,` + asst, false},
		{"an empty assistant message", user + `,{"role":"assistant","content":""},` + user, false},
		{"a null assistant message", user + `,{"role":"assistant","content":null},` + user, false},
		{"an empty user message", `{"role":"user","content":" "},` + asst + `,` + user, false},
		{"a blank text block", user + `,{"role":"assistant","content":[{"type":"text","text":" "}]},` + user, false},
	} {
		resp, b := post(t, s.URL()+"/chat/completions", `{"model":"m","messages":[`+tc.messages+`]}`)
		if ok := resp.StatusCode == 200; ok != tc.ok || (!ok && resp.StatusCode != 400) {
			t.Errorf("%s: %d %s, want accepted %v", tc.name, resp.StatusCode, b, tc.ok)
		}
	}
}
