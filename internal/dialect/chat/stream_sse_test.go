package chat_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/memgate/memgate/internal/dialect/chat"
	"github.com/memgate/memgate/internal/dialect/dialecttest"
	"github.com/memgate/memgate/internal/dialect/sse"
	"github.com/memgate/memgate/internal/memory"
)

// TestStreamMatchesWholeReply: the event stream, fed in any pieces and with
// any line ends, reassembles the message and usage the whole reply holds,
// as the other adapters' streams do.
func TestStreamMatchesWholeReply(t *testing.T) {
	stream, err := os.ReadFile("testdata/stream_tool_call.sse")
	if err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile("testdata/reply_tool_call.json")
	if err != nil {
		t.Fatal(err)
	}
	want, wantUsage, err := chat.ReplyFromJSON(whole)
	if err != nil {
		t.Fatal(err)
	}
	// Top-level keys sorted, null and empty members dropped; nested values as
	// the upstream sent them.
	wantRaw := `{"content":"Checking the weather in Porto.","role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Porto\"}"}}]}`
	if string(want.Raw) != wantRaw {
		t.Errorf("whole reply:\n got %s\nwant %s", want.Raw, wantRaw)
	}
	if *wantUsage != (memory.Usage{PromptTokens: 82, CompletionTokens: 17, TotalTokens: 99, CachedTokens: 64}) {
		t.Errorf("usage %+v", *wantUsage)
	}
	crlf := bytes.ReplaceAll(stream, []byte("\n"), []byte("\r\n"))
	cr := bytes.ReplaceAll(stream, []byte("\n"), []byte("\r"))
	noBlankLineAtEnd := bytes.TrimSuffix(bytes.TrimSuffix(stream, []byte("\n")), []byte("\n"))
	dialecttest.CheckStream(t, chat.NewStream, map[string][]byte{"lf": stream, "crlf": crlf, "cr": cr, "last event unterminated": noBlankLineAtEnd}, want, *wantUsage)
}

func TestStreamFailures(t *testing.T) {
	stream, _ := os.ReadFile("testdata/stream_tool_call.sse")
	dialecttest.CheckStreamFailures(t, chat.NewStream, 100, []dialecttest.StreamFailure{
		{Name: "empty", Stream: nil, Want: memory.ErrInvalid},
		{Name: "only the sentinel", Stream: []byte("data: [DONE]\n\n"), Want: memory.ErrInvalid},
		{Name: "a chunk that is not JSON", Stream: append(bytes.Clone(stream[:200]), "\n\ndata: {oops\n\n"...), Want: memory.ErrInvalid},
		{Name: "over the limit", Stream: stream, Limit: 512, Want: sse.ErrTooLarge},
		{Name: "ended before finish_reason and [DONE]", Stream: stream[:bytes.Index(stream, []byte(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1764000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason"`))], Want: memory.ErrInvalid},
	})
}

// TestStreamEnd: a stream counts as whole once its [DONE] sentinel or
// choice 0's finish_reason arrived (some upstreams send one without the
// other); a stream broken off by an error event is the partial reply
// marked failed. A stream that simply stops before either — an upstream
// cut off mid-answer that still ended its body cleanly — is not a reply
// (see TestStreamFailures).
func TestStreamEnd(t *testing.T) {
	const first = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Forty\"}}]}\n\n"
	tests := []struct {
		name, stream, want string
		failed             bool
	}{
		{"[DONE] without finish_reason", first + "data: [DONE]\n\n", "Forty", false},
		{"finish_reason without [DONE]", first + "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"-two\"},\"finish_reason\":\"stop\"}]}\n\n", "Forty-two", false},
		{"error event without either", first + "data: {\"error\":{\"message\":\"overloaded\"}}\n\n", "Forty", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := dialecttest.Feed(chat.NewStream(0), []byte(tc.stream), 7).Result()
			if err != nil {
				t.Fatalf("Result: %v", err)
			}
			if got.Content != tc.want || got.Failed() != tc.failed {
				t.Fatalf("reply %s, want content %q failed %v", got.Raw, tc.want, tc.failed)
			}
		})
	}
}

// TestStreamKeepsOpenRouterReasoningDetails: OpenRouter streams a
// reply's reasoning_details in pieces (a reasoning.text detail's text over
// several deltas of one index, its signature in a later one, a
// reasoning.encrypted detail whole): the stream reassembles the array the
// whole reply holds, and both store beside it its digest as received
// (memory.ReasoningDigest), which a replay checks it against. The
// provider's own U+FFFD is part of what it signed.
func TestStreamKeepsOpenRouterReasoningDetails(t *testing.T) {
	stream, err := os.ReadFile("testdata/stream_openrouter_reasoning.sse")
	if err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile("testdata/reply_openrouter_reasoning.json")
	if err != nil {
		t.Fatal(err)
	}
	want, wantUsage, err := chat.ReplyFromJSON(whole)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Details json.RawMessage `json:"reasoning_details"`
		Digest  string          `json:"reasoning_details_sha256"`
	}
	if err := json.Unmarshal(want.Raw, &m); err != nil {
		t.Fatal(err)
	}
	const details = `[{"type":"reasoning.text","text":"The user wants Porto's weather \ufffd I should call get_weather.","signature":"EqQBCkgIBxABGAIiQBs0c2lnbmVkLWJ5LWFudGhyb3BpYw==","id":null,"format":"anthropic-claude-v1","index":0},` +
		`{"type":"reasoning.encrypted","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB5URj","id":null,"format":"anthropic-claude-v1","index":1}]`
	if !dialecttest.SameJSON(t, m.Details, []byte(details)) {
		t.Errorf("whole reply's reasoning_details\n%s\nwant\n%s", m.Details, details)
	}
	if m.Digest == "" || m.Digest != memory.ReasoningDigest([]byte(details)) {
		t.Errorf("digest %q, want that of the details as received", m.Digest)
	}
	for _, step := range []int{1, 7, 100, 1 << 20} {
		got, u, err := dialecttest.Feed(chat.NewStream(0), stream, step).Result()
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if !dialecttest.SameJSON(t, got.Raw, want.Raw) || *u != *wantUsage {
			t.Errorf("step %d: streamed %s (usage %+v)\nwhole %s (usage %+v)", step, got.Raw, *u, want.Raw, *wantUsage)
		}
	}
}
