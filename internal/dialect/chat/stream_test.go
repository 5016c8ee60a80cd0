package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

func TestStreamReplyErrorEventKeepsPartialReplyMarkedFailed(t *testing.T) {
	tests := []struct {
		name   string
		events [][2]string // type, data
		want   string      // content kept
		reason string
	}{
		{"error object mid-stream", [][2]string{
			{"message", `{"choices":[{"index":0,"delta":{"role":"assistant","content":"The capital "}}]}`},
			{"message", `{"choices":[{"index":0,"delta":{"content":"of"}}]}`},
			{"message", `{"error":{"message":"overloaded","type":"server_error"}}`},
		}, "The capital of", "overloaded"},
		{"named error event", [][2]string{
			{"message", `{"choices":[{"index":0,"delta":{"content":"Half"}}]}`},
			{"error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
		}, "Half", "Overloaded"},
		{"error before any chunk", [][2]string{
			{"message", `{"error":{"message":"context length exceeded"}}`},
		}, "", "context length exceeded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStreamReply()
			for _, ev := range tc.events {
				if err := s.AddEvent(ev[0], []byte(ev[1])); err != nil {
					t.Fatalf("AddEvent: %v", err)
				}
			}
			msg, _, err := s.Result()
			if err != nil {
				t.Fatalf("Result: %v", err)
			}
			if !msg.Failed() || s.Failed() != tc.reason {
				t.Fatalf("failed = %v (%q), want marked with %q: %s", msg.Failed(), s.Failed(), tc.reason, msg.Raw)
			}
			if msg.Role != "assistant" || msg.Content != tc.want {
				t.Fatalf("message %q %q, want assistant %q", msg.Role, msg.Content, tc.want)
			}
			var fields map[string]json.RawMessage
			json.Unmarshal(msg.Raw, &fields)
			if string(fields[memory.FailedField]) != `"`+tc.reason+`"` {
				t.Fatalf("raw %s lacks %s", msg.Raw, memory.FailedField)
			}
		})
	}
}

func TestStreamedAndWholeReplyKeepReasoning(t *testing.T) {
	whole, _, err := ReplyFromJSON([]byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"42","reasoning_content":"6 times 7"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	s := NewStreamReply()
	for _, c := range []string{
		`{"choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"6 times"}}]}`,
		`{"choices":[{"index":0,"delta":{"reasoning_content":" 7"}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"42"},"finish_reason":"stop"}]}`,
	} {
		if err := s.Add([]byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	streamed, _, err := s.Result()
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	json.Unmarshal(whole.Raw, &a)
	json.Unmarshal(streamed.Raw, &b)
	if ja, _ := json.Marshal(a); string(ja) != string(marshalT(t, b)) {
		t.Fatalf("streamed %s, whole %s: want the same fields", streamed.Raw, whole.Raw)
	}
	if streamed.Failed() {
		t.Fatal("a complete stream is not failed")
	}
}

func marshalT(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// manyCallsAtOneIndex returns n chunks of an upstream that sends each tool
// call whole at index 0, each with its own id.
func manyCallsAtOneIndex(n int) [][]byte {
	chunks := make([][]byte, n)
	for i := range chunks {
		chunks[i] = fmt.Appendf(nil, `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_%d","type":"function","function":{"name":"f","arguments":"{\"n\":%d}"}}]}}]}`, i, i)
	}
	return chunks
}

// TestStreamReplyCallsAtOneIndex: calls sent whole at one index each get
// their own slot, in the order they came.
func TestStreamReplyCallsAtOneIndex(t *testing.T) {
	got := streamedCalls(t, manyCallsAtOneIndex(300))
	if len(got.ToolCalls) != 300 {
		t.Fatalf("%d tool calls, want 300", len(got.ToolCalls))
	}
	for i, c := range got.ToolCalls {
		if c.ID != fmt.Sprintf("call_%d", i) || c.Function.Arguments != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("call %d = %+v", i, c)
		}
	}
}

// BenchmarkStreamReplyCallsAtOneIndex: a hostile upstream's 4 MB of calls
// at one index (about 30,000) cost time linear in their number (before:
// each new call scanned every earlier one, 7.4 CPU-seconds a stream).
func BenchmarkStreamReplyCallsAtOneIndex(b *testing.B) {
	chunks := manyCallsAtOneIndex(30000)
	for b.Loop() {
		s := NewStreamReply()
		for _, c := range chunks {
			s.Add(c)
		}
	}
}

// argumentPieces returns a stream of n chunks: a tool call and a legacy
// function call whose arguments come a few bytes a chunk, and whose name
// comes in pieces and then, with the id, repeated whole (as some upstreams
// resend them), with the arguments they join to.
func argumentPieces(n int) (chunks [][]byte, args, fnArgs string) {
	var a, f []byte
	chunks = append(chunks,
		[]byte(`{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_abc","type":"function","function":{"name":"get_","arguments":""}}]}}]}`),
		[]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"weather"}}],"function_call":{"name":"lookup","arguments":""}}}]}`),
		[]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_abc","function":{"name":"get_weather"}}],"function_call":{"name":"lookup"}}}]}`))
	for i := range n {
		p, q := fmt.Sprintf(`"k%d":%d,`, i, i), fmt.Sprintf(`%d;`, i)
		a, f = append(a, p...), append(f, q...)
		pj, _ := json.Marshal(p)
		qj, _ := json.Marshal(q)
		chunks = append(chunks, fmt.Appendf(nil, `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":%s}}],"function_call":{"arguments":%s}}}]}`, pj, qj))
	}
	return chunks, string(a), string(f)
}

// TestStreamReplyJoinsArgumentPieces: arguments streamed a few bytes at a
// time join to the whole text, and a name streamed in pieces, then
// repeated whole, to its value.
func TestStreamReplyJoinsArgumentPieces(t *testing.T) {
	chunks, args, fnArgs := argumentPieces(500)
	got := streamedCalls(t, chunks)
	want := ToolCall{ID: "call_abc", Type: "function", Function: Function{Name: "get_weather", Arguments: args}}
	if len(got.ToolCalls) != 1 || got.ToolCalls[0] != want {
		t.Errorf("tool_calls = %.300v…, want [%.300v…]", got.ToolCalls, want)
	}
	if wantFn := (Function{Name: "lookup", Arguments: fnArgs}); got.FunctionCall != wantFn {
		t.Errorf("function_call = %.300v…, want %.300v…", got.FunctionCall, wantFn)
	}
}

// TestStreamReplyArgumentPiecesAllocateLinearly: joining arguments
// streamed in 5,000 small pieces allocates a small multiple of the stream's
// size (joined by +=, each piece copied everything before it: over 300
// times the stream).
func TestStreamReplyArgumentPiecesAllocateLinearly(t *testing.T) {
	chunks, _, _ := argumentPieces(5000)
	size := 0
	for _, c := range chunks {
		size += len(c)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s := NewStreamReply()
	for _, c := range chunks {
		if err := s.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Result(); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > uint64(30*size) {
		t.Errorf("allocated %d bytes for a stream of %d, want at most 30 times it", n, size)
	}
}

// BenchmarkStreamReplyArgumentPieces: a tool call's arguments (and a
// legacy function call's) streamed in 40,000 small pieces, about the 4 MB
// capture cap, cost time linear in their length.
func BenchmarkStreamReplyArgumentPieces(b *testing.B) {
	chunks, _, _ := argumentPieces(40000)
	for b.Loop() {
		s := NewStreamReply()
		for _, c := range chunks {
			s.Add(c)
		}
		s.Result()
	}
}

// streamedCalls folds chunks into a StreamReply and returns the tool
// calls and function call of the message it stores.
func streamedCalls(t *testing.T, chunks [][]byte) (got struct {
	ToolCalls    []ToolCall `json:"tool_calls"`
	FunctionCall Function   `json:"function_call"`
}) {
	t.Helper()
	s := NewStreamReply()
	for _, c := range chunks {
		if err := s.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	msg, _, err := s.Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(msg.Raw, &got); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestStreamReplyBoundsToolCalls: an upstream streaming empty tool-call
// deltas at ever new indices (each ~12 bytes that reassemble into a ~60
// byte call, and a slot held in memory) cannot make a reply that holds and
// stores many times what it sent: past maxStreamToolCalls distinct calls
// the stream is rejected as invalid, however the indices are spread
// (one chunk or many, indices up to 1e9), and no more slots are held.
func TestStreamReplyBoundsToolCalls(t *testing.T) {
	manyInOneChunk := func(n, step int) [][]byte {
		var b strings.Builder
		b.WriteString(`{"choices":[{"index":0,"delta":{"tool_calls":[`)
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"index":%d}`, i*step)
		}
		b.WriteString(`]}}]}`)
		return [][]byte{[]byte(b.String())}
	}
	chunkPerCall := func(n, step int) [][]byte {
		chunks := make([][]byte, n)
		for i := range chunks {
			chunks[i] = fmt.Appendf(nil, `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":%d}]}}]}`, i*step)
		}
		return chunks
	}
	tests := []struct {
		name   string
		chunks [][]byte
		ok     bool
	}{
		{"the limit in one chunk", manyInOneChunk(maxStreamToolCalls, 1), true},
		{"past the limit in one chunk", manyInOneChunk(maxStreamToolCalls+1, 1), false},
		{"past the limit, a chunk each, indices 1e6 apart", chunkPerCall(maxStreamToolCalls+1, 1_000_000), false},
		{"past the limit, ids at one index", manyCallsAtOneIndex(maxStreamToolCalls + 1), false},
		{"a huge index", [][]byte{[]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1000000000,"id":"c","function":{"name":"f","arguments":"{}"}}]}}]}`)}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStreamReply()
			var err error
			for _, c := range tc.chunks {
				if err = s.Add(c); err != nil {
					break
				}
			}
			if tc.ok != (err == nil) || err != nil && !errors.Is(err, memory.ErrInvalid) {
				t.Fatalf("Add error %v, want ok %v (else invalid)", err, tc.ok)
			}
			if len(s.calls) > maxStreamToolCalls {
				t.Fatalf("%d tool calls held, want at most %d", len(s.calls), maxStreamToolCalls)
			}
		})
	}
}

// TestStreamHangUp: HangUp reports a whole answer once choice 0's
// finish_reason arrived, and HungUpResult returns the reply then with
// what followed (the usage chunk); before it, nothing.
func TestStreamHangUp(t *testing.T) {
	chunk := func(delta, finish string) string {
		return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
	}
	text := chunk(`{"role":"assistant","content":"You like tea."}`, "null")
	usage := `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}` + "\n\n"
	for _, tt := range []struct {
		name          string
		before, after string
		shown         bool
	}{
		{"after finish_reason", text + chunk(`{}`, `"stop"`), usage, true},
		{"before finish_reason", text, chunk(`{}`, `"stop"`) + usage, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStream(0)
			s.Write([]byte(tt.before))
			if got := s.HangUp(); got != tt.shown {
				t.Errorf("HangUp %v, want %v", got, tt.shown)
			}
			s.Write([]byte(tt.after))
			msg, u, err := s.HungUpResult()
			switch {
			case !tt.shown && !errors.Is(err, memory.ErrInvalid):
				t.Errorf("HungUpResult %s, %v; want memory.ErrInvalid", msg.Raw, err)
			case tt.shown && (err != nil || msg.Content != "You like tea." || u == nil || u.CompletionTokens != 4):
				t.Errorf("HungUpResult %s, %+v, %v; want the reply with its usage", msg.Raw, u, err)
			}
		})
	}
}
