package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/dialect/dialecttest"
	"github.com/memgate/memgate/internal/dialect/sse"
	"github.com/memgate/memgate/internal/memory"
)

func TestStreamMatchesWholeReply(t *testing.T) {
	stream, err := os.ReadFile("testdata/stream_tool_use.sse")
	if err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile("testdata/reply_tool_use.json")
	if err != nil {
		t.Fatal(err)
	}
	want, wantUsage, err := ReplyFromJSON(whole)
	if err != nil {
		t.Fatal(err)
	}
	// The signed blocks as received, and their digest (memory.ReasoningDigest).
	const blocks = `[{"type":"thinking","thinking":"The user wants the weather in Porto; I should call the tool.","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}]`
	wantRaw := `{"role":"assistant","content":"Okay, let's check the weather in Porto.","tool_calls":[{"id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Porto\",\"unit\":\"celsius\"}"}}],"reasoning_content":"The user wants the weather in Porto; I should call the tool.",` +
		`"thinking_blocks":` + blocks + `,"thinking_blocks_sha256":"` + memory.ReasoningDigest([]byte(blocks)) + `"}`
	if string(want.Raw) != wantRaw {
		t.Errorf("whole reply:\n got %s\nwant %s", want.Raw, wantRaw)
	}
	if *wantUsage != (memory.Usage{PromptTokens: 572, CompletionTokens: 89, TotalTokens: 661, CachedTokens: 100}) {
		t.Errorf("usage %+v", *wantUsage)
	}
	crlf := bytes.ReplaceAll(stream, []byte("\n"), []byte("\r\n"))
	// The reply is whole at message_delta's stop_reason, which carries the
	// final usage: a stream read up to it (a client that hung up there)
	// reassembles the same reply.
	atStop := stream[:bytes.Index(stream, []byte("event: message_stop"))]
	dialecttest.CheckStream(t, NewStream, map[string][]byte{"lf": stream, "crlf": crlf, "ended at stop_reason": atStop}, want, *wantUsage)
}

// TestReplyFingerprintMatchesResentHistory: a reply the client sends back as
// history converts to the message capture stored, so alignment finds it.
func TestReplyFingerprintMatchesResentHistory(t *testing.T) {
	whole, _ := os.ReadFile("testdata/reply_tool_use.json")
	reply, _, err := ReplyFromJSON(whole)
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Content json.RawMessage `json:"content"`
	}
	json.Unmarshal(whole, &resp)
	body := `{"model":"claude-sonnet-4-5","max_tokens":9,"messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":` +
		string(resp.Content) + `},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","content":"18C"}]}]}`
	r, err := ParseRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Messages[1]; got.Fingerprint() != reply.Fingerprint() || string(got.Raw) != string(reply.Raw) {
		t.Errorf("resent history %s\ncaptured reply %s", got.Raw, reply.Raw)
	}
}

func TestStreamFailures(t *testing.T) {
	stream, _ := os.ReadFile("testdata/stream_tool_use.sse")
	cut := stream[:bytes.Index(stream, []byte("event: message_delta"))]
	dialecttest.CheckStreamFailures(t, NewStream, 100, []dialecttest.StreamFailure{
		{Name: "broken off", Stream: cut, Want: memory.ErrInvalid},
		{Name: "over the limit", Stream: stream, Limit: 512, Want: sse.ErrTooLarge},
		{Name: "empty", Want: memory.ErrInvalid},
	})
}

// TestStreamErrorEventKeepsThePartialReply: a stream the upstream breaks
// off with an error event (mid-stream, or before message_start) yields
// what was streamed before it, marked failed with the event's message, as
// chat's StreamReply does.
func TestStreamErrorEventKeepsThePartialReply(t *testing.T) {
	stream, _ := os.ReadFile("testdata/stream_tool_use.sse")
	whole, _, err := dialecttest.Feed(NewStream(0), stream, 100).Result()
	if err != nil {
		t.Fatal(err)
	}
	cut := stream[:bytes.Index(stream, []byte("event: message_delta"))]
	const errEvent = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
	for _, tt := range []struct {
		name        string
		stream      []byte
		wantContent string
	}{
		{"mid-stream", append(bytes.Clone(cut), errEvent...), whole.Content},
		{"before message_start", []byte(errEvent), ""},
	} {
		msg, _, err := dialecttest.Feed(NewStream(0), tt.stream, 100).Result()
		if err != nil || !msg.Failed() || !strings.Contains(string(msg.Raw), "overloaded_error: Overloaded") || msg.Content != tt.wantContent {
			t.Errorf("%s: Result %s, %v; want content %q marked failed with the event's message", tt.name, msg.Raw, err, tt.wantContent)
		}
	}
}

func TestReplyFromJSONRejectsErrors(t *testing.T) {
	for _, b := range []string{`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, `nope`} {
		if _, _, err := ReplyFromJSON([]byte(b)); !errors.Is(err, memory.ErrInvalid) {
			t.Errorf("ReplyFromJSON(%s) = %v", b, err)
		}
	}
}

func TestErrorBody(t *testing.T) {
	tests := []struct {
		status                     int
		typ, msg, param, code, out string
	}{
		{400, "invalid_request_error", "bad", "messages[1]", "x", `{"type":"error","error":{"type":"invalid_request_error","message":"messages[1]: bad"}}`},
		{502, "upstream_error", "upstream down", "", "", `{"type":"error","error":{"type":"api_error","message":"upstream down"}}`},
		{529, "", "busy", "", "", `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`},
		{401, "authentication_error", "key <missing> & co", "", "", `{"type":"error","error":{"type":"authentication_error","message":"key <missing> & co"}}`},
		// A message that names its param already is not prefixed a second time.
		{400, "invalid_request_error", "invalid header X-Memory-User: bad", "X-Memory-User", "", `{"type":"error","error":{"type":"invalid_request_error","message":"invalid header X-Memory-User: bad"}}`},
		{400, "invalid_request_error", "X-Memory-Timestamp must be an RFC 3339 time.", "X-Memory-Timestamp", "", `{"type":"error","error":{"type":"invalid_request_error","message":"X-Memory-Timestamp must be an RFC 3339 time."}}`},
		{400, "invalid_request_error", "the model must be a string", "model", "", `{"type":"error","error":{"type":"invalid_request_error","message":"model: the model must be a string"}}`},
	}
	for _, tt := range tests {
		if got := string(ErrorBody(tt.status, tt.typ, tt.msg, tt.param, tt.code)); got != tt.out {
			t.Errorf("ErrorBody(%d, %q) = %s, want %s", tt.status, tt.typ, got, tt.out)
		}
	}
	if !strings.Contains(string(ErrorBody(404, "", "m", "", "")), "not_found_error") {
		t.Error("404 is not not_found_error")
	}
}

// TestStreamBoundsBlocks: an upstream streaming empty blocks at ever new
// indices (~90 bytes each, a block of several builders held for each)
// cannot make the capture hold many times the stream: past maxStreamBlocks
// blocks the stream is invalid, and no more are held.
func TestStreamBoundsBlocks(t *testing.T) {
	for _, n := range []int{maxStreamBlocks, maxStreamBlocks + 1} {
		var b strings.Builder
		b.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"role\":\"assistant\",\"content\":[]}}\n\n")
		for i := range n {
			fmt.Fprintf(&b, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":%d,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n", i*1000)
		}
		b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
		s := NewStream(0)
		s.Write([]byte(b.String()))
		_, _, err := s.Result()
		if ok := n <= maxStreamBlocks; ok != (err == nil) || err != nil && !errors.Is(err, memory.ErrInvalid) {
			t.Errorf("%d blocks: Result error %v, want ok %v (else invalid)", n, err, ok)
		}
		if len(s.blocks) > maxStreamBlocks {
			t.Errorf("%d blocks held, want at most %d", len(s.blocks), maxStreamBlocks)
		}
	}
}

// TestStreamHangUp: HangUp reports a whole answer once message_delta gave
// its stop_reason, and HungUpResult returns the reply then; before it,
// nothing.
func TestStreamHangUp(t *testing.T) {
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	text := ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"usage":{"input_tokens":5,"output_tokens":1}}}`) +
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"You like tea."}}`) +
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
	stop := ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":4}}`)
	end := ev("message_stop", `{"type":"message_stop"}`)
	for _, tt := range []struct {
		name          string
		before, after string
		shown         bool
	}{
		{"after stop_reason", text + stop, end, true},
		{"before stop_reason", text, stop + end, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := dialecttest.Feed(NewStream(0), []byte(tt.before), 5)
			if got := s.HangUp(); got != tt.shown {
				t.Errorf("HangUp %v, want %v", got, tt.shown)
			}
			dialecttest.Feed(s, []byte(tt.after), 5)
			msg, _, err := s.HungUpResult()
			switch {
			case !tt.shown && !errors.Is(err, memory.ErrInvalid):
				t.Errorf("HungUpResult %s, %v; want memory.ErrInvalid", msg.Raw, err)
			case tt.shown && (err != nil || msg.Content != "You like tea."):
				t.Errorf("HungUpResult %s, %v; want the reply", msg.Raw, err)
			}
		})
	}
}
