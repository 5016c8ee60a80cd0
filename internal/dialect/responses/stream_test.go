package responses

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/memgate/memgate/internal/dialect/sse"
	"github.com/memgate/memgate/internal/memory"
)

// feed writes stream to a new Stream in pieces of step bytes.
func feed(t *testing.T, stream []byte, step int, limit int64) *Stream {
	t.Helper()
	s := NewStream(limit)
	for len(stream) > 0 {
		n := min(step, len(stream))
		if _, err := s.Write(stream[:n]); err != nil {
			return s
		}
		stream = stream[n:]
	}
	return s
}

func TestStreamMatchesWholeReply(t *testing.T) {
	whole, err := os.ReadFile("testdata/reply_function_call.json")
	if err != nil {
		t.Fatal(err)
	}
	want, wantUsage, err := ReplyFromJSON(whole)
	if err != nil {
		t.Fatal(err)
	}
	wantRaw := `{"role":"assistant","content":"Let me look that up.","tool_calls":[{"id":"call_12xvnXX5ZUTAzRUZ2J8QAAOF","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Porto\"}"}}],"reasoning_content":"Checking the weather first."}`
	if string(want.Raw) != wantRaw {
		t.Errorf("whole reply:\n got %s\nwant %s", want.Raw, wantRaw)
	}
	if *wantUsage != (memory.Usage{PromptTokens: 328, CompletionTokens: 52, TotalTokens: 380}) {
		t.Errorf("usage %+v", *wantUsage)
	}
	for _, name := range []string{"stream_function_call.sse", "stream_deltas_only.sse"} {
		stream, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		for _, step := range []int{1, 7, 100, 1 << 20} {
			got, u, err := feed(t, stream, step, 0).Result()
			if err != nil {
				t.Fatalf("%s step %d: %v", name, step, err)
			}
			if string(got.Raw) != wantRaw {
				t.Errorf("%s step %d: streamed %s", name, step, got.Raw)
			}
			if *u != *wantUsage {
				t.Errorf("%s step %d: usage %+v", name, step, *u)
			}
		}
	}
}

// TestReplyFingerprintMatchesResentInput: the output items a client sends
// back as input convert to the message capture stored.
func TestReplyFingerprintMatchesResentInput(t *testing.T) {
	whole, _ := os.ReadFile("testdata/reply_function_call.json")
	reply, _, err := ReplyFromJSON(whole)
	if err != nil {
		t.Fatal(err)
	}
	out := whole[bytes.Index(whole, []byte(`"output":`))+len(`"output":`):]
	out = out[:bytes.Index(out, []byte(`],"parallel`))+1]
	r, err := ParseRequest([]byte(`{"model":"gpt-4.1","input":[{"role":"user","content":"weather?"}` + "," + string(out[1:len(out)-1]) +
		`,{"type":"function_call_output","call_id":"call_12xvnXX5ZUTAzRUZ2J8QAAOF","output":"18C"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Parsed[1]; string(got.Raw) != string(reply.Raw) || got.Fingerprint() != reply.Fingerprint() {
		t.Errorf("resent input %s\ncaptured reply %s", got.Raw, reply.Raw)
	}
}

func TestStreamFailures(t *testing.T) {
	stream, _ := os.ReadFile("testdata/stream_function_call.sse")
	cut := stream[:bytes.Index(stream, []byte("event: response.completed"))]
	failed := append(bytes.Clone(cut), "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"object\":\"response\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"boom\"}}}\n\n"...)
	errEv := append(bytes.Clone(cut), "event: error\ndata: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"slow down\",\"param\":null}\n\n"...)
	tests := []struct {
		name   string
		stream []byte
		limit  int64
		want   error
	}{
		{"broken off", cut, 0, memory.ErrInvalid},
		{"failed", failed, 0, memory.ErrInvalid},
		{"error event", errEv, 0, memory.ErrInvalid},
		{"over the limit", stream, 1024, sse.ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := feed(t, tt.stream, 64, tt.limit).Result(); !errors.Is(err, tt.want) {
				t.Errorf("Result error %v, want %v", err, tt.want)
			}
		})
	}
	for _, b := range []string{`{"object":"response","status":"failed","error":{"code":"x","message":"y"},"output":[]}`, `{"error":{"message":"bad"}}`, `[`} {
		if _, _, err := ReplyFromJSON([]byte(b)); !errors.Is(err, memory.ErrInvalid) {
			t.Errorf("ReplyFromJSON(%s) = %v", b, err)
		}
	}
}

func TestErrorBody(t *testing.T) {
	if got := string(ErrorBody(400, "invalid_request_error", "input must be <x>", "input", "")); got != `{"error":{"message":"input must be <x>","type":"invalid_request_error","param":"input","code":null}}` {
		t.Errorf("ErrorBody = %s", got)
	}
	if got := string(ErrorBody(401, "authentication_error", "key", "", "invalid_api_key")); got != `{"error":{"message":"key","type":"authentication_error","param":null,"code":"invalid_api_key"}}` {
		t.Errorf("ErrorBody = %s", got)
	}
}
