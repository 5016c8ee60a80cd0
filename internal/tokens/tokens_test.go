package tokens_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/tokens"
)

// mustCounter returns a Counter with the given window overrides.
func mustCounter(tb testing.TB, windows map[string]int) *tokens.Counter {
	tb.Helper()
	c, err := tokens.New(windows)
	if err != nil {
		tb.Fatalf("tokens.New: %v", err)
	}
	return c
}

// Reference counts from OpenAI's cookbook "How to count tokens with tiktoken",
// section 5 ("Comparing encodings") and section 4 (o200k_base
// "tiktoken is great!" → [83, 8251, 2488, 382, 2212, 0]).
func TestTextMatchesCookbook(t *testing.T) {
	c := mustCounter(t, nil)
	tests := []struct {
		text   string
		cl100k int
		o200k  int
	}{
		{"tiktoken is great!", 6, 6},
		{"antidisestablishmentarianism", 6, 6},
		{"2 + 2 = 4", 7, 7},
		{"お誕生日おめでとう", 9, 8},
		{"", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			if got := c.Text("gpt-4", tt.text); got != tt.cl100k {
				t.Errorf("cl100k_base (gpt-4): %d tokens, want %d", got, tt.cl100k)
			}
			if got := c.Text("gpt-4o", tt.text); got != tt.o200k {
				t.Errorf("o200k_base (gpt-4o): %d tokens, want %d", got, tt.o200k)
			}
		})
	}
}

// cookbookMessages is the example list of section 6 of the cookbook.
var cookbookMessages = []string{
	`{"role":"system","content":"You are a helpful, pattern-following assistant that translates corporate jargon into plain English."}`,
	`{"role":"system","name":"example_user","content":"New synergies will help drive top-line growth."}`,
	`{"role":"system","name":"example_assistant","content":"Things working well together will increase revenue."}`,
	`{"role":"system","name":"example_user","content":"Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage."}`,
	`{"role":"system","name":"example_assistant","content":"Let's talk later when we're less busy about how to do better."}`,
	`{"role":"user","content":"This late pivot means we don't have time to boil the ocean for the client deliverable."}`,
}

func rawMessages(ss ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(ss))
	for i, s := range ss {
		out[i] = json.RawMessage(s)
	}
	return out
}

// The cookbook's num_tokens_from_messages and the OpenAI API both report 129
// prompt tokens for gpt-3.5-turbo and gpt-4, and 124 for gpt-4o and
// gpt-4o-mini.
func TestMessagesMatchesCookbook(t *testing.T) {
	c := mustCounter(t, nil)
	msgs := rawMessages(cookbookMessages...)
	tests := []struct {
		model string
		want  int
	}{
		{"gpt-3.5-turbo", 129},
		{"gpt-3.5-turbo-0125", 129},
		{"gpt-4-0613", 129},
		{"gpt-4", 129},
		{"gpt-4o", 124},
		{"gpt-4o-mini", 124},
		{"gpt-4o-2024-08-06", 124},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			if got := c.Messages(tt.model, msgs); got != tt.want {
				t.Errorf("Messages(%s) = %d, want %d", tt.model, got, tt.want)
			}
		})
	}
}

func TestMessagesStructure(t *testing.T) {
	c := mustCounter(t, nil)
	const model = "gpt-4o"
	text := func(s string) int { return c.Text(model, s) }
	tests := []struct {
		name string
		msg  string
		want int
	}{
		{
			name: "content parts count their text",
			msg:  `{"role":"user","content":[{"type":"text","text":"hello there"},{"type":"text","text":"general"}]}`,
			want: tokens.PerMessage + text("user") + text("hello there") + text("general"),
		},
		{
			name: "escaped string content is decoded",
			msg:  `{"role":"user","content":"line one\nline two \"quoted\" \u00e9t\u00e9"}`,
			want: tokens.PerMessage + text("user") + text("line one\nline two \"quoted\" été"),
		},
		{
			name: "low detail image",
			msg:  `{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}}]}`,
			want: tokens.PerMessage + text("user") + tokens.ImageLow,
		},
		{
			name: "auto detail image",
			msg:  `{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}`,
			want: tokens.PerMessage + text("user") + tokens.ImageHigh,
		},
		{
			name: "audio part is estimated",
			msg:  `{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}`,
			want: tokens.PerMessage + text("user") + tokens.OtherPart,
		},
		{
			name: "tool calls count name, arguments and overhead",
			msg: `{"role":"assistant","content":null,"tool_calls":[` +
				`{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},` +
				`{"id":"call_2","type":"function","function":{"name":"get_time","arguments":"{}"}}]}`,
			want: tokens.PerMessage + text("assistant") +
				tokens.PerToolCall + text("get_weather") + text(`{"city":"Paris"}`) +
				tokens.PerToolCall + text("get_time") + text("{}"),
		},
		{
			name: "tool result counts its content",
			msg:  `{"role":"tool","tool_call_id":"call_1","content":"{\"temp\":21}"}`,
			want: tokens.PerMessage + text("tool") + text(`{"temp":21}`),
		},
		{
			name: "name adds its tokens and one",
			msg:  `{"role":"user","name":"alice","content":"hi"}`,
			want: tokens.PerMessage + text("user") + text("alice") + tokens.PerName + text("hi"),
		},
		{
			name: "refusal is counted",
			msg:  `{"role":"assistant","content":null,"refusal":"I can't help with that."}`,
			want: tokens.PerMessage + text("assistant") + text("I can't help with that."),
		},
		{
			name: "malformed message is counted as text",
			msg:  `not json at all`,
			want: tokens.PerMessage + text("not json at all"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := c.RawMessage(model, json.RawMessage(tt.msg)); got != tt.want {
				t.Errorf("RawMessage = %d, want %d", got, tt.want)
			}
			if got, want := c.Messages(model, rawMessages(tt.msg)), tt.want+tokens.ReplyPriming; got != want {
				t.Errorf("Messages = %d, want %d", got, want)
			}
		})
	}
}

func TestMessage(t *testing.T) {
	c := mustCounter(t, nil)
	raw := json.RawMessage(`{"role":"user","name":"bob","content":"What is the capital of France?"}`)
	parsed, err := memory.ParseMessage(raw)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Message("gpt-4o", parsed), c.RawMessage("gpt-4o", raw); got != want {
		t.Errorf("Message with Raw = %d, want RawMessage %d", got, want)
	}
	plain := memory.Message{Role: "user", Content: "What is the capital of France?"}
	want := tokens.PerMessage + c.Text("gpt-4o", "user") + c.Text("gpt-4o", plain.Content)
	if got := c.Message("gpt-4o", plain); got != want {
		t.Errorf("Message without Raw = %d, want %d", got, want)
	}
}

func TestEncoding(t *testing.T) {
	tests := []struct{ model, want string }{
		{"gpt-4o", tokens.O200kBase},
		{"gpt-4o-mini-2024-07-18", tokens.O200kBase},
		{"gpt-4.1-nano", tokens.O200kBase},
		{"gpt-4.5-preview", tokens.O200kBase},
		{"o1-preview", tokens.O200kBase},
		{"o3-mini", tokens.O200kBase},
		{"o4-mini", tokens.O200kBase},
		{"gpt-5", tokens.O200kBase},
		{"some-local-llama", tokens.O200kBase},
		{"", tokens.O200kBase},
		{"gpt-4", tokens.CL100kBase},
		{"gpt-4-0613", tokens.CL100kBase},
		{"gpt-4-turbo", tokens.CL100kBase},
		{"gpt-3.5-turbo-0125", tokens.CL100kBase},
		{"text-embedding-3-small", tokens.CL100kBase},
		{"ft:gpt-3.5-turbo:acme::abc", tokens.CL100kBase},
		{"openai/gpt-4", tokens.CL100kBase},
		{"GPT-4", tokens.CL100kBase},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			if got := tokens.Encoding(tt.model); got != tt.want {
				t.Errorf("Encoding(%q) = %s, want %s", tt.model, got, tt.want)
			}
		})
	}
}

func TestContextWindow(t *testing.T) {
	c := mustCounter(t, map[string]int{"my-model": 32000, "gpt-4o-mini": 64000})
	tests := []struct {
		model string
		want  int
	}{
		{"gpt-4o", 128000},
		{"gpt-4o-2024-08-06", 128000},
		{"gpt-4o-mini", 64000}, // override wins over the built-in entry
		{"gpt-4o-mini-2024-07-18", 64000},
		{"gpt-4.1", 1047576},
		{"gpt-4.1-mini", 1047576},
		{"gpt-4-turbo-2024-04-09", 128000},
		{"gpt-4", 8192},
		{"gpt-4-0613", 8192},
		{"gpt-3.5-turbo", 16385},
		{"o1", 200000},
		{"o3-mini", 200000},
		{"o4-mini", 200000},
		{"gpt-5-mini", 400000},
		{"my-model-v2", 32000},
		{"unknown", tokens.DefaultContextWindow},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			if got := c.ContextWindow(tt.model); got != tt.want {
				t.Errorf("ContextWindow(%q) = %d, want %d", tt.model, got, tt.want)
			}
		})
	}
}

func TestNewRejectsBadWindows(t *testing.T) {
	tests := []map[string]int{{"": 1000}, {"m": 0}, {"m": -5}}
	for _, w := range tests {
		t.Run(fmt.Sprint(w), func(t *testing.T) {
			if _, err := tokens.New(w); err == nil {
				t.Errorf("New(%v) succeeded, want error", w)
			}
		})
	}
}

// Counting from many goroutines gives the same answers as counting from one
// (run under -race to catch shared mutable state).
func TestConcurrentCounting(t *testing.T) {
	c := mustCounter(t, nil)
	msgs := rawMessages(cookbookMessages...)
	long := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 50)
	wantLong := c.Text("gpt-4o", long)
	const workers, rounds = 8, 25
	var wg sync.WaitGroup
	errs := make(chan string, workers*rounds)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			model := []string{"gpt-4", "gpt-4o"}[w%2]
			want := map[string]int{"gpt-4": 129, "gpt-4o": 124}[model]
			for range rounds {
				if got := c.Messages(model, msgs); got != want {
					errs <- fmt.Sprintf("%s: %d, want %d", model, got, want)
				}
				if got := c.Text("gpt-4o", long); got != wantLong {
					errs <- fmt.Sprintf("long text: %d, want %d", got, wantLong)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
