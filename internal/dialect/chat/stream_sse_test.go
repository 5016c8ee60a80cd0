package chat_test

import (
	"bytes"
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
	})
}
