package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/dialect/dialecttest"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestOpenRouterNewOnlyToolLoopReplaysSignedReasoning: a chat client that
// sends only its newest message, through an OpenRouter-style upstream
// that streams its reasoning as reasoning and reasoning_details deltas
// (a signed reasoning.text, a reasoning.encrypted; wire-exact, in
// internal/dialect/chat/testdata). The first request asks and gets a
// tool call; the second sends only the tool result. memgate replays the
// stored call before it with the provider's signed and encrypted details
// as it gave them — which OpenRouter needs to continue the loop — and
// nothing else of its reasoning: no plain reasoning text, no digest. The
// third request asks something new: the loop is over, and no stored
// reasoning goes back at all. Streamed and whole replies alike. End to
// end: `gateway serve` on SQLite.
func TestOpenRouterNewOnlyToolLoopReplaysSignedReasoning(t *testing.T) {
	for _, tc := range []struct {
		name, file, typ string
		stream          bool
	}{
		{"stream", "stream_openrouter_reasoning.sse", "text/event-stream", true},
		{"whole", "reply_openrouter_reasoning.json", "application/json", false},
	} {
		t.Run(tc.name, func(t *testing.T) { openRouterToolLoop(t, tc.file, tc.typ, tc.stream) })
	}
}

func openRouterToolLoop(t *testing.T, file, typ string, stream bool) {
	reply, err := os.ReadFile("../../internal/dialect/chat/testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	first := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", typ)
		w.Write(reply)
	})
	up := upstreamtest.New(t, upstreamtest.Sequence(first,
		upstreamtest.Chat(upstreamtest.Reply{Content: "18C and sunny in Porto."}),
		upstreamtest.Chat(upstreamtest.Reply{Content: "Tomorrow too."})))
	gw := serveDialects(t, up.URL(), up.URL())
	who := map[string]string{"Authorization": "Bearer sk-or-test", "X-Memory-User": "ana", "X-Memory-Conversation": "or-loop"}
	const head = `{"model":"anthropic/claude-sonnet-4.5","reasoning":{"max_tokens":2000},"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],`
	post := func(body string) {
		t.Helper()
		if status, b := postJSON(t, gw+"/v1/chat/completions", body, who); status != http.StatusOK {
			t.Fatalf("%d %s", status, b)
		}
	}
	post(head + `"stream":` + map[bool]string{true: "true", false: "false"}[stream] + `,"messages":[{"role":"user","content":"Weather in Porto?"}]}`)
	eventually(t, "the tool call to be stored", func() bool { return storedCount(t, gw, "ana", "or-loop") >= 2 })
	post(head + `"messages":[{"role":"tool","tool_call_id":"toolu_01A09q90qw90lq917835lq9","content":"18C, sunny"}]}`)
	var sent struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(up.Last(t).Body, &sent); err != nil {
		t.Fatal(err)
	}
	var call struct {
		Role    string          `json:"role"`
		Details json.RawMessage `json:"reasoning_details"`
	}
	for _, m := range sent.Messages {
		if bytes.Contains(m, []byte(`"tool_calls"`)) {
			json.Unmarshal(m, &call)
		}
	}
	const want = `[{"type":"reasoning.text","text":"The user wants Porto's weather \ufffd I should call get_weather.","signature":"EqQBCkgIBxABGAIiQBs0c2lnbmVkLWJ5LWFudGhyb3BpYw==","id":null,"format":"anthropic-claude-v1","index":0},` +
		`{"type":"reasoning.encrypted","data":"EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB5URj","id":null,"format":"anthropic-claude-v1","index":1}]`
	body := string(up.Last(t).Body)
	if call.Role != "assistant" || !dialecttest.SameJSON(t, call.Details, []byte(want)) {
		t.Errorf("the replayed call's reasoning_details\n%s\nwant the provider's\n%s\nsent: %s", call.Details, want, body)
	}
	if strings.Contains(body, `"reasoning":"`) || strings.Contains(body, "_sha256") {
		t.Errorf("plain reasoning or memgate's digest went upstream: %s", body)
	}
	eventually(t, "the answer to be stored", func() bool { return storedCount(t, gw, "ana", "or-loop") >= 4 })
	post(head + `"messages":[{"role":"user","content":"And tomorrow?"}]}`)
	if body := string(up.Last(t).Body); strings.Contains(body, "reasoning_details") || strings.Contains(body, "I should call") ||
		!strings.Contains(body, "toolu_01A09q90qw90lq917835lq9") {
		t.Errorf("a finished loop's call went back with its reasoning (or not at all): %s", body)
	}
}
