package proxy

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/dialect/dialecttest"
	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
)

// storedTurns are the conversation's stored turns the fake memory adds for
// a client that sends only its newest turn.
var storedTurns = []json.RawMessage{
	json.RawMessage(`{"role":"user","content":"I am planning a trip to Porto next week."}`),
	json.RawMessage(`{"role":"assistant","content":"Porto is lovely in spring."}`),
}

const memoryFact = "The user is vegetarian."

// rememberingPreparer answers like inject: the client's system messages,
// a memory block, the stored turns (unless the client sent its own history
// or the provider holds it), then the client's other messages.
func rememberingPreparer(got chan<- memory.Request) preparerFunc {
	return func(_ context.Context, req memory.Request) (memory.Prepared, error) {
		if got != nil {
			got <- req
		}
		var system, rest []json.RawMessage
		var parsed []memory.Message
		for _, m := range req.Messages {
			if memory.IsSystem(m.Role) {
				system = append(system, m.Raw)
			} else {
				rest = append(rest, m.Raw)
				parsed = append(parsed, m)
			}
		}
		out := append(system, json.RawMessage(`{"role":"system","content":"<memory>`+memoryFact+`</memory>"}`))
		if prior, _ := memory.SplitAnswered(parsed); len(prior) == 0 && !req.NoRecent {
			out = append(out, storedTurns...)
		}
		out = append(out, rest...)
		return memory.Prepared{Messages: out, TokensOriginal: 100, TokensSent: 90}, nil
	}
}

// dialectGateway is a gateway whose OpenAI and Anthropic upstreams are
// both the dialecttest fake provider, with memory on.
func dialectGateway(t *testing.T, prep Preparer, capt Capturer, mutate func(*gatewayConfig)) (*gateway, *dialecttest.Upstream) {
	t.Helper()
	fake := dialecttest.NewUpstream(t)
	cfg := defaultConfig()
	cfg.Upstream.BaseURL = fake.URL + "/v1"
	cfg.Upstream.Anthropic.BaseURL = fake.URL + "/v1"
	cfg.ShutdownGrace = 5 * time.Second
	cfg.LoadTimeout = 10 * time.Second // as testConfig: a busy machine must not degrade the fake Preparers
	if mutate != nil {
		mutate(&cfg)
	}
	logs := &syncBuffer{}
	srv, p := newGateway(t, cfg, Deps{Resolver: identity.New(cfg.Keys), Preparer: prep, Capturer: capt}, nil, logs)
	url, _ := mustRun(t, srv, p)
	return &gateway{URL: url, p: p, srv: srv, logs: logs}, fake
}

// sdkRoundTrip is what the SDK scripts print for one round trip.
type sdkRoundTrip struct {
	First struct {
		StopReason string          `json:"stop_reason"`
		Status     string          `json:"status"`
		Text       string          `json:"text"`
		ToolUse    json.RawMessage `json:"tool_use"`
		Function   json.RawMessage `json:"function_call"`
	} `json:"first"`
	Second *struct {
		Text string `json:"text"`
	} `json:"second"`
}

type sdkResult struct {
	NonStream    sdkRoundTrip   `json:"non_stream"`
	Stream       sdkRoundTrip   `json:"stream"`
	StreamHelper sdkRoundTrip   `json:"stream_helper"`
	StreamEvents map[string]int `json:"stream_events"`
	Previous     *struct {
		Status string `json:"status"`
		Text   string `json:"text"`
	} `json:"previous_response"`
}

// drainCaptures returns the n exchanges captured, failing after a deadline.
func drainCaptures(t *testing.T, c chanCapturer, n int) []memory.Exchange {
	t.Helper()
	out := make([]memory.Exchange, 0, n)
	for range n {
		out = append(out, wait(t, c, "a capture"))
	}
	return out
}

// TestAnthropicSDKThroughMemgate runs @anthropic-ai/sdk messages.create
// (non-streamed, streamed, and the stream helper; a tool-use round trip
// each) against memgate in front of the fake Anthropic provider: memory
// lands in system after the app's text, stored turns are prepended within
// Anthropic's rules (the fake rejects anything else), the client's key and
// version headers pass through, and every exchange is captured whole —
// tool use, usage and all.
func TestAnthropicSDKThroughMemgate(t *testing.T) {
	capt := make(chanCapturer, 16)
	g, fake := dialectGateway(t, rememberingPreparer(nil), capt, nil)
	out := dialecttest.RunScript(t, "anthropic.mjs", "ANTHROPIC_BASE_URL="+g.URL,
		`SDK_HEADERS={"X-Memory-User":"alice","X-Memory-Conversation":"trip","anthropic-beta":"tools-2024-04-04"}`)
	var res sdkResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for name, rt := range map[string]sdkRoundTrip{"non-stream": res.NonStream, "stream": res.Stream, "stream helper": res.StreamHelper} {
		if rt.First.StopReason != "tool_use" || !strings.Contains(string(rt.First.ToolUse), `"get_weather"`) {
			t.Errorf("%s: first reply %+v", name, rt.First)
		}
		if rt.Second == nil || rt.Second.Text != "The tool says: 18C and sunny in Porto." {
			t.Errorf("%s: second reply %+v", name, rt.Second)
		}
	}
	for _, ev := range []string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"} {
		if res.StreamEvents[ev] == 0 {
			t.Errorf("the SDK saw no %s event through memgate: %v", ev, res.StreamEvents)
		}
	}

	reqs := fake.Requests()
	if len(reqs) != 6 {
		t.Fatalf("%d upstream requests, want 6", len(reqs))
	}
	for i, r := range reqs {
		if r.Path != "/v1/messages" || r.Header.Get("anthropic-version") == "" || r.Header.Get("anthropic-beta") != "tools-2024-04-04" ||
			r.Header.Get("Authorization") != "Bearer sk-ant-sdk-harness" || r.Header.Get("X-Memory-User") != "" {
			t.Errorf("request %d: %s headers %v", i, r.Path, r.Header)
		}
		var body struct {
			System   string            `json:"system"`
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if body.System != "You are a travel assistant.\n\n<memory>"+memoryFact+"</memory>" {
			t.Errorf("request %d: system %q", i, body.System)
		}
		// The first request of each round trip carries only the newest
		// turn and gets the stored turns; the second carries the client's
		// own history, which stays as it was.
		first := i%2 == 0
		hasStored := len(body.Messages) > 0 && strings.Contains(string(body.Messages[0]), "trip to Porto next week")
		if hasStored != first {
			t.Errorf("request %d: stored turns prepended = %v, want %v: %s", i, hasStored, first, body.Messages)
		}
		if !first && !strings.Contains(string(r.Body), `"tool_result"`) {
			t.Errorf("request %d lost the tool result: %s", i, r.Body)
		}
	}

	for i, ex := range drainCaptures(t, capt, 6) {
		if ex.User != "alice" || ex.Conversation != "trip" || ex.Usage == nil || ex.Usage.CompletionTokens == 0 {
			t.Errorf("capture %d: %+v", i, ex)
		}
		if strings.Contains(string(ex.Reply.Raw), "tool_calls") {
			if !strings.Contains(string(ex.Reply.Raw), `get_weather`) || !strings.Contains(string(ex.Reply.Raw), `Porto`) {
				t.Errorf("capture %d: tool call reply %s", i, ex.Reply.Raw)
			}
			continue
		}
		if ex.Reply.Content != "The tool says: 18C and sunny in Porto." || len(ex.Prior) == 0 {
			t.Errorf("capture %d: reply %q after %d prior messages", i, ex.Reply.Content, len(ex.Prior))
		}
	}
}

// TestResponsesSDKThroughMemgate runs openai responses.create (non-streamed,
// streamed, the stream helper — a function-call round trip each — and a
// previous_response_id call) against memgate in front of the fake
// Responses provider: memory lands in instructions, stored turns become
// input items except with previous_response_id (the memory request says
// NoRecent), store and the rest pass untouched, and every exchange is
// captured.
func TestResponsesSDKThroughMemgate(t *testing.T) {
	capt := make(chanCapturer, 16)
	got := make(chan memory.Request, 16)
	g, fake := dialectGateway(t, rememberingPreparer(got), capt, nil)
	out := dialecttest.RunScript(t, "responses.mjs", "OPENAI_BASE_URL="+g.URL+"/v1",
		`SDK_HEADERS={"X-Memory-User":"alice","X-Memory-Conversation":"trip"}`)
	var res sdkResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for name, rt := range map[string]sdkRoundTrip{"non-stream": res.NonStream, "stream": res.Stream, "stream helper": res.StreamHelper} {
		if rt.First.Status != "completed" || !strings.Contains(string(rt.First.Function), `"get_weather"`) {
			t.Errorf("%s: first response %+v", name, rt.First)
		}
		if rt.Second == nil || rt.Second.Text != "The tool says: 18C and sunny in Porto." {
			t.Errorf("%s: second response %+v", name, rt.Second)
		}
	}
	for _, ev := range []string{"response.created", "response.output_text.delta", "response.function_call_arguments.delta", "response.completed"} {
		if res.StreamEvents[ev] == 0 {
			t.Errorf("the SDK saw no %s event through memgate: %v", ev, res.StreamEvents)
		}
	}
	if res.Previous == nil || res.Previous.Status != "completed" || res.Previous.Text != "You said: And tomorrow?" {
		t.Errorf("previous_response_id call: %+v", res.Previous)
	}

	reqs := fake.Requests()
	if len(reqs) != 7 {
		t.Fatalf("%d upstream requests, want 7", len(reqs))
	}
	for i, r := range reqs {
		var body struct {
			Instructions string            `json:"instructions"`
			Input        json.RawMessage   `json:"input"`
			Store        *bool             `json:"store"`
			Previous     string            `json:"previous_response_id"`
			Tools        []json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if r.Header.Get("Authorization") != "Bearer sk-sdk-harness" {
			t.Errorf("request %d: Authorization %q", i, r.Header.Get("Authorization"))
		}
		hasStored := strings.Contains(string(body.Input), "trip to Porto next week")
		if body.Previous != "" {
			// The provider holds the history: memory, no stored turns.
			if body.Instructions != "<memory>"+memoryFact+"</memory>" || hasStored || string(body.Input) != `"And tomorrow?"` {
				t.Errorf("previous_response_id request: %s", r.Body)
			}
			continue
		}
		if body.Instructions != "You are a travel assistant.\n\n<memory>"+memoryFact+"</memory>" {
			t.Errorf("request %d: instructions %q", i, body.Instructions)
		}
		if body.Store == nil || *body.Store || len(body.Tools) != 1 {
			t.Errorf("request %d: store or tools changed: %s", i, r.Body)
		}
		first := i%2 == 0
		if hasStored != first {
			t.Errorf("request %d: stored turns prepended = %v, want %v: %s", i, hasStored, first, body.Input)
		}
	}

	var noRecent int
	for range 7 {
		if r := wait(t, got, "Prepare"); r.NoRecent {
			noRecent++
		}
	}
	if noRecent != 1 {
		t.Errorf("%d memory requests with NoRecent, want 1 (the previous_response_id call)", noRecent)
	}
	for i, ex := range drainCaptures(t, capt, 7) {
		if ex.User != "alice" || ex.Usage == nil || ex.Usage.TotalTokens == 0 || len(ex.Turn) == 0 {
			t.Errorf("capture %d: %+v", i, ex)
		}
		if ex.Reply.Content == "" && !strings.Contains(string(ex.Reply.Raw), "get_weather") {
			t.Errorf("capture %d: empty reply %s", i, ex.Reply.Raw)
		}
	}
}
