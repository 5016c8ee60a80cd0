package fakeupstream

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/memgate/memgate/internal/engine/enrich"
	"github.com/memgate/memgate/internal/memory"
)

func mustServer(tb testing.TB, opts Options) *httptest.Server {
	tb.Helper()
	srv := httptest.NewServer(Handler(opts))
	tb.Cleanup(srv.Close)
	return srv
}

func TestCompletion(t *testing.T) {
	srv := mustServer(t, Options{})
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || c.Object != "chat.completion" || len(c.Choices) != 1 || c.Choices[0].Message.Content != Reply {
		t.Errorf("status %d, reply %+v", resp.StatusCode, c)
	}
}

func TestStream(t *testing.T) {
	srv := mustServer(t, Options{Chunks: 5})
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"gpt-4o-mini","stream": true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, line)
		}
	}
	// role + 5 content + finish + usage + [DONE]
	if len(events) != 9 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("got %d events ending %q", len(events), events[len(events)-1])
	}
	var content strings.Builder
	for _, ev := range events[:len(events)-1] {
		var c struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatalf("event %q: %v", ev, err)
		}
		for _, ch := range c.Choices {
			content.WriteString(ch.Delta.Content)
		}
		if c.Usage != nil && c.Usage.CompletionTokens != 5 {
			t.Errorf("usage completion_tokens %d, want 5", c.Usage.CompletionTokens)
		}
	}
	if content.String() != "Hello! This is a fixed " || StreamedReply(5) != content.String() {
		t.Errorf("content %q, StreamedReply %q", content.String(), StreamedReply(5))
	}
}

func TestWantsStream(t *testing.T) {
	tests := []struct {
		body string
		want bool
	}{
		{`{"stream":true}`, true},
		{`{"stream" : true}`, true},
		{`{"stream":false}`, false},
		{`{"messages":[]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			if got := wantsStream([]byte(tt.body)); got != tt.want {
				t.Errorf("wantsStream(%s) = %v", tt.body, got)
			}
		})
	}
}

func TestLatency(t *testing.T) {
	srv := mustServer(t, Options{Latency: 30 * time.Millisecond})
	start := time.Now()
	resp, err := http.Get(srv.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Errorf("completion took %v, want ≥ 30ms latency", took)
	}
}

// memgate's structured model calls (the rolling summary, fact extraction)
// get replies they accept, so a benchmark's capture worker does the work a
// real model enables instead of retrying failures.
func TestJSONReply(t *testing.T) {
	srv := mustServer(t, Options{})
	cfg := openai.DefaultConfig("sk-test")
	cfg.BaseURL = srv.URL + "/v1"
	client := openai.NewClientWithConfig(cfg)

	sum := enrich.NewLLM(client, "gpt-4o-mini", func(s string) int { return len(strings.Fields(s)) })
	out, err := sum.Summarize(t.Context(), enrich.Input{
		Messages:  []memory.Message{{Role: "user", Content: "Say hello."}, {Role: "assistant", Content: "Hello!"}},
		MaxTokens: 200,
	})
	if err != nil || out.Summary == "" {
		t.Errorf("summariser: %+v, %v", out, err)
	}

	resp, err := client.CreateChatCompletion(t.Context(), openai.ChatCompletionRequest{
		Model:          "gpt-4o-mini",
		Messages:       []openai.ChatCompletionMessage{{Role: "user", Content: "User messages:\nhi"}},
		ResponseFormat: &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject},
	})
	if err != nil || len(resp.Choices) != 1 {
		t.Fatalf("extraction call: %v", err)
	}
	var facts struct {
		Facts *[]json.RawMessage `json:"facts"`
	}
	if err := json.Unmarshal([]byte(resp.Choices[0].Message.Content), &facts); err != nil || facts.Facts == nil {
		t.Errorf("extraction reply %q: facts %v, %v", resp.Choices[0].Message.Content, facts.Facts, err)
	}

	// A plain request still gets the plain reply.
	plain, err := client.CreateChatCompletion(t.Context(), openai.ChatCompletionRequest{
		Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}},
	})
	if err != nil || json.Valid([]byte(plain.Choices[0].Message.Content)) {
		t.Errorf("plain reply %+v, %v", plain, err)
	}
}

func TestRecallSeen(t *testing.T) {
	tests := []struct {
		body     string
		seen, ok bool
	}{
		{`{"messages":[{"content":"hello"}]}`, false, false},
		{`{"messages":[{"content":"note t0002 recall-check:t0001"}]}`, false, true},
		{`{"messages":[{"content":"note t0001 recall-check:t0000"},{"content":"note t0002 recall-check:t0001"}]}`, true, true},
		{`{"messages":[{"content":"recall-check:"}]}`, false, false},
	}
	for _, tt := range tests {
		seen, ok := RecallSeen([]byte(tt.body))
		if seen != tt.seen || ok != tt.ok {
			t.Errorf("RecallSeen(%s) = %v, %v; want %v, %v", tt.body, seen, ok, tt.seen, tt.ok)
		}
	}
}
