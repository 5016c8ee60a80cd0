package responses

import (
	"bytes"
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
	streams := map[string][]byte{}
	for _, name := range []string{"stream_function_call.sse", "stream_deltas_only.sse"} {
		if streams[name], err = os.ReadFile("testdata/" + name); err != nil {
			t.Fatal(err)
		}
	}
	dialecttest.CheckStream(t, NewStream, streams, want, *wantUsage)
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
	if got := r.Messages[1]; string(got.Raw) != string(reply.Raw) || got.Fingerprint() != reply.Fingerprint() {
		t.Errorf("resent input %s\ncaptured reply %s", got.Raw, reply.Raw)
	}
}

func TestStreamFailures(t *testing.T) {
	stream, _ := os.ReadFile("testdata/stream_function_call.sse")
	cut := stream[:bytes.Index(stream, []byte("event: response.completed"))]
	dialecttest.CheckStreamFailures(t, NewStream, 64, []dialecttest.StreamFailure{
		{Name: "broken off", Stream: cut, Want: memory.ErrInvalid},
		{Name: "over the limit", Stream: stream, Limit: 1024, Want: sse.ErrTooLarge},
	})
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

// TestStreamFailureKeepsThePartialReply: a stream that ends in
// response.failed or an error event yields what was streamed before it,
// marked failed with the upstream's message, as chat's StreamReply does.
func TestStreamFailureKeepsThePartialReply(t *testing.T) {
	stream, _ := os.ReadFile("testdata/stream_function_call.sse")
	whole, _, err := dialecttest.Feed(NewStream(0), stream, 64).Result()
	if err != nil {
		t.Fatal(err)
	}
	cut := stream[:bytes.Index(stream, []byte("event: response.completed"))]
	for _, tt := range []struct{ name, event, reason string }{
		{"response.failed", "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"object\":\"response\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\",\"message\":\"boom\"}}}\n\n", "boom"},
		{"error event", "event: error\ndata: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"slow down\",\"param\":null}\n\n", "slow down"},
	} {
		msg, _, err := dialecttest.Feed(NewStream(0), append(bytes.Clone(cut), tt.event...), 64).Result()
		if err != nil || !msg.Failed() || !strings.Contains(string(msg.Raw), tt.reason) || msg.Fingerprint() != whole.Fingerprint() {
			t.Errorf("%s: Result %s, %v; want the reply so far (%s) marked failed with %q", tt.name, msg.Raw, err, whole.Raw, tt.reason)
		}
	}
}

// TestStreamBoundsParts: an upstream streaming empty deltas at ever new
// output or content indices (~80 bytes each, an item or a builder held for
// each) cannot make the capture hold many times the stream: past
// maxStreamParts items and texts the stream is invalid, and no more are
// held.
func TestStreamBoundsParts(t *testing.T) {
	spread := map[string]string{
		"output_index":  `{"type":"response.output_text.delta","output_index":%d,"content_index":0,"delta":""}`,
		"content_index": `{"type":"response.output_text.delta","output_index":0,"content_index":%d,"delta":""}`,
		"summary_index": `{"type":"response.reasoning_summary_text.delta","output_index":0,"summary_index":%d,"delta":""}`,
	}
	for name, event := range spread {
		for _, n := range []int{maxStreamParts / 2, maxStreamParts + 1} {
			var b strings.Builder
			for i := range n {
				b.WriteString("data: ")
				fmt.Fprintf(&b, event, i*1000)
				b.WriteString("\n\n")
			}
			b.WriteString("data: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"object\":\"response\",\"status\":\"completed\",\"output\":[]}}\n\n")
			s := NewStream(0)
			s.Write([]byte(b.String()))
			_, _, err := s.Result()
			if ok := n <= maxStreamParts/2; ok != (err == nil) || err != nil && !errors.Is(err, memory.ErrInvalid) {
				t.Errorf("%s, %d events: Result error %v, want ok %v (else invalid)", name, n, err, ok)
			}
			if s.parts > maxStreamParts {
				t.Errorf("%s: %d parts held, want at most %d", name, s.parts, maxStreamParts)
			}
		}
	}
}

// TestToollessStreamWholeAtItsMessage: the reply to a request that offered
// no tools is whole once its message is (its output_item.done, or the
// content_part.done of each of its parts), so a stream read up to there (a
// client that stopped reading at it) reassembles the reply response.completed
// would have given, without the usage; before, or for a request that
// offered tools (a function call may follow the message), it is not whole.
func TestToollessStreamWholeAtItsMessage(t *testing.T) {
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	stream := ev("response.created", `{"type":"response.created","response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`) +
		ev("response.output_item.added", `{"type":"response.output_item.added","output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}`) +
		ev("response.reasoning_summary_text.delta", `{"type":"response.reasoning_summary_text.delta","output_index":0,"summary_index":0,"delta":"Tea, said before."}`) +
		ev("response.output_item.done", `{"type":"response.output_item.done","output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"Tea, said before."}]}}`) +
		ev("response.output_item.added", `{"type":"response.output_item.added","output_index":1,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}`) +
		ev("response.content_part.added", `{"type":"response.content_part.added","output_index":1,"content_index":0,"part":{"type":"output_text","text":"","annotations":[]}}`) +
		ev("response.output_text.delta", `{"type":"response.output_text.delta","output_index":1,"content_index":0,"delta":"You like "}`) +
		ev("response.output_text.delta", `{"type":"response.output_text.delta","output_index":1,"content_index":0,"delta":"tea."}`) +
		ev("response.output_text.done", `{"type":"response.output_text.done","output_index":1,"content_index":0,"text":"You like tea."}`) +
		ev("response.content_part.done", `{"type":"response.content_part.done","output_index":1,"content_index":0,"part":{"type":"output_text","text":"You like tea.","annotations":[]}}`) +
		ev("response.output_item.done", `{"type":"response.output_item.done","output_index":1,"item":{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"You like tea.","annotations":[]}]}}`) +
		ev("response.completed", `{"type":"response.completed","response":{"id":"resp_1","object":"response","status":"completed","output":[{"id":"rs_1","type":"reasoning","summary":[{"type":"summary_text","text":"Tea, said before."}]},{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"You like tea.","annotations":[]}]}],"usage":{"input_tokens":9,"output_tokens":4}}}`)
	upTo := func(marker string, nth int) []byte {
		i := -1
		for range nth {
			i += 1 + strings.Index(stream[i+1:], marker)
		}
		return []byte(stream[:i])
	}
	whole, usage, err := dialecttest.Feed(NewToollessStream(0), []byte(stream), 64).Result()
	if err != nil || usage == nil {
		t.Fatalf("whole stream: %v, usage %v", err, usage)
	}
	if want := `{"role":"assistant","content":"You like tea.","reasoning_content":"Tea, said before."}`; string(whole.Raw) != want {
		t.Fatalf("whole stream: %s, want %s", whole.Raw, want)
	}
	for _, tt := range []struct {
		name      string
		newStream func(int64) *Stream
		stream    []byte
		whole     bool
	}{
		{"up to response.completed", NewToollessStream, upTo("event: response.completed", 1), true},
		{"up to the message's output_item.done", NewToollessStream, upTo("event: response.output_item.done", 2), true},
		{"up to the message's content_part.done", NewToollessStream, upTo("event: response.content_part.done", 1), false},
		{"up to the message's output_text.done", NewToollessStream, upTo("event: response.output_text.done", 1), false},
		{"up to the reasoning's output_item.done", NewToollessStream, upTo("event: response.output_item.added", 2), false},
		{"offering tools, up to response.completed", NewStream, upTo("event: response.completed", 1), false},
	} {
		msg, u, err := dialecttest.Feed(tt.newStream(0), tt.stream, 7).Result()
		switch {
		case tt.whole && (err != nil || string(msg.Raw) != string(whole.Raw) || u != nil):
			t.Errorf("%s: Result %s, usage %v, %v; want %s without usage", tt.name, msg.Raw, u, err, whole.Raw)
		case !tt.whole && !errors.Is(err, memory.ErrInvalid):
			t.Errorf("%s: Result %s, %v; want memory.ErrInvalid", tt.name, msg.Raw, err)
		}
	}
}

// TestToollessStreamNotWholeBeforeItsAnswer: a tool-less reply is not
// whole at a message with a content part still open (a second text to
// come after the first's done events) nor at a preamble (phase
// "commentary", which more output follows), only at a message that is
// the answer (phase "final_answer", or none) with every part done.
func TestToollessStreamNotWholeBeforeItsAnswer(t *testing.T) {
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	created := ev("response.created", `{"type":"response.created","response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`)
	added := func(out int, phase string) string {
		return ev("response.output_item.added", fmt.Sprintf(`{"type":"response.output_item.added","output_index":%d,"item":{"id":"msg_%[1]d","type":"message",%s"status":"in_progress","role":"assistant","content":[]}}`, out, phase))
	}
	text := func(out, part int, s string) string {
		return ev("response.content_part.added", fmt.Sprintf(`{"type":"response.content_part.added","output_index":%d,"content_index":%d,"part":{"type":"output_text","text":""}}`, out, part)) +
			ev("response.output_text.delta", fmt.Sprintf(`{"type":"response.output_text.delta","output_index":%d,"content_index":%d,"delta":%q}`, out, part, s)) +
			ev("response.output_text.done", fmt.Sprintf(`{"type":"response.output_text.done","output_index":%d,"content_index":%d,"text":%q}`, out, part, s)) +
			ev("response.content_part.done", fmt.Sprintf(`{"type":"response.content_part.done","output_index":%d,"content_index":%d,"part":{"type":"output_text","text":%q}}`, out, part, s))
	}
	itemDone := func(out int, phase, s string) string {
		return ev("response.output_item.done", fmt.Sprintf(`{"type":"response.output_item.done","output_index":%d,"item":{"id":"msg_%[1]d","type":"message",%s"status":"completed","role":"assistant","content":[{"type":"output_text","text":%q}]}}`, out, phase, s))
	}
	const commentary, final = `"phase":"commentary",`, `"phase":"final_answer",`
	for _, tt := range []struct {
		name   string
		stream string
		want   string // the reply's content; "" when not whole
	}{
		{"second part added", created + added(0, "") + text(0, 0, "Part one.") +
			ev("response.content_part.added", `{"type":"response.content_part.added","output_index":0,"content_index":1,"part":{"type":"output_text","text":""}}`), ""},
		{"second part done", created + added(0, "") + text(0, 0, "Part one.") + text(0, 1, " Part two."), "Part one. Part two."},
		{"commentary done", created + added(0, commentary) + text(0, 0, "Let me look.") + itemDone(0, commentary, "Let me look."), ""},
		{"commentary's parts done", created + added(0, commentary) + text(0, 0, "Let me look."), ""},
		{"final answer after commentary", created + added(0, commentary) + text(0, 0, "Let me look.") + itemDone(0, commentary, "Let me look.") +
			added(1, final) + text(1, 0, "Found it."), "Let me look.Found it."},
		{"final answer done", created + added(0, final) + text(0, 0, "Found it.") + itemDone(0, final, "Found it."), "Found it."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			msg, _, err := dialecttest.Feed(NewToollessStream(0), []byte(tt.stream), 7).Result()
			switch {
			case tt.want == "" && !errors.Is(err, memory.ErrInvalid):
				t.Errorf("Result %s, %v; want memory.ErrInvalid", msg.Raw, err)
			case tt.want != "" && (err != nil || msg.Content != tt.want):
				t.Errorf("Result %s, %v; want content %q", msg.Raw, err, tt.want)
			}
		})
	}
}

// TestStreamHangUp: HangUp reports a whole answer shown — a tool-less
// reply whole (answered), or a message or a function call item done —
// and HungUpResult returns the reply as it was whole then, a message
// begun after left out; none when it was not whole (a second message
// begun, or a request with tools: a call may have followed).
func TestStreamHangUp(t *testing.T) {
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	created := ev("response.created", `{"type":"response.created","response":{"id":"resp_1","object":"response","status":"in_progress","output":[]}}`)
	message := func(out int, s string) (begun, done string) {
		begun = ev("response.output_item.added", fmt.Sprintf(`{"type":"response.output_item.added","output_index":%d,"item":{"id":"msg_%[1]d","type":"message","status":"in_progress","role":"assistant","content":[]}}`, out)) +
			ev("response.content_part.added", fmt.Sprintf(`{"type":"response.content_part.added","output_index":%d,"content_index":0,"part":{"type":"output_text","text":""}}`, out)) +
			ev("response.output_text.delta", fmt.Sprintf(`{"type":"response.output_text.delta","output_index":%d,"content_index":0,"delta":%q}`, out, s))
		done = ev("response.output_item.done", fmt.Sprintf(`{"type":"response.output_item.done","output_index":%d,"item":{"id":"msg_%[1]d","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":%q}]}}`, out, s))
		return begun, done
	}
	call := ev("response.output_item.done", `{"type":"response.output_item.done","output_index":0,"item":{"id":"fc_1","type":"function_call","status":"completed","call_id":"c1","name":"f","arguments":"{}"}}`)
	first, firstDone := message(0, "One.")
	second, _ := message(1, "Two.")
	for _, tt := range []struct {
		name        string
		new         func(int64) *Stream
		before      string // written before the hang-up
		after       string // written after it
		shown       bool
		wantContent string // HungUpResult's content; "" when not whole
	}{
		{"tool-less, message done, a second begun after", NewToollessStream, created + first + firstDone, second, true, "One."},
		{"tool-less, message begun", NewToollessStream, created + first, "", false, ""},
		{"tool-less, second message begun", NewToollessStream, created + first + firstDone + second, "", true, ""},
		{"tools, message done", NewStream, created + first + firstDone, second, true, ""},
		{"tools, function call done", NewStream, created + call, "", true, ""},
		{"tools, message begun", NewStream, created + first, "", false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := dialecttest.Feed(tt.new(0), []byte(tt.before), 7)
			if got := s.HangUp(); got != tt.shown {
				t.Errorf("HangUp %v, want %v", got, tt.shown)
			}
			dialecttest.Feed(s, []byte(tt.after), 7)
			msg, _, err := s.HungUpResult()
			switch {
			case tt.wantContent == "" && !errors.Is(err, memory.ErrInvalid):
				t.Errorf("HungUpResult %s, %v; want memory.ErrInvalid", msg.Raw, err)
			case tt.wantContent != "" && (err != nil || msg.Content != tt.wantContent):
				t.Errorf("HungUpResult %s, %v; want content %q", msg.Raw, err, tt.wantContent)
			}
		})
	}
}
