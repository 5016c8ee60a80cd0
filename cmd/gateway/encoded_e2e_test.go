package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestServeStoresGzippedReplies: behind an upstream (or CDN) that gzips
// its replies though memgate asked for no encoding, `gateway serve`
// relays them decoded to a client that asked for none, and stores each
// turn, streamed and whole: a later turn of the conversation is sent
// upstream with both.
func TestServeStoresGzippedReplies(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.Encoded("gzip", echoUpstream()))
	url, _ := mustServe(t, up)
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	send := func(text string, stream bool) string {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "stream": stream, "messages": []any{user(text)}})
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Memory-User", "alice")
		req.Header.Set("X-Memory-Conversation", "gz")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "" {
			t.Fatalf("status %d, Content-Encoding %q, read error %v: %q", resp.StatusCode, resp.Header.Get("Content-Encoding"), err, got)
		}
		return string(got)
	}
	if got := send("my name is Alice", true); !strings.Contains(got, `"content":"Alice"`) || !strings.HasSuffix(got, "data: [DONE]\n\n") {
		t.Fatalf("streamed reply %q, want the decoded stream", got)
	}
	if got := send("I live in Lisbon", false); !json.Valid([]byte(got)) || !strings.Contains(got, `"ack: I live in Lisbon"`) {
		t.Fatalf("reply %q, want the decoded completion", got)
	}
	send("where do I live?", false)
	want := []string{
		"user: my name is Alice", "assistant: ack: my name is Alice",
		"user: I live in Lisbon", "assistant: ack: I live in Lisbon",
		"user: where do I live?",
	}
	if got := upstreamTexts(t, up); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("upstream messages:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if v := metricValue(t, url, "memgate_capture_skipped_total"); v != "" {
		t.Fatalf("memgate_capture_skipped_total %s, want no turn skipped", v)
	}
}
