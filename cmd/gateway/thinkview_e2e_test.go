package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestStoredReasoningNotSentBack: a reasoning model behind an
// OpenAI-compatible server replies with its reasoning in a leading
// <think> block; memgate stores the reply as relayed (the inspector shows
// it whole), but a newest-only client's next turn sends upstream the
// answer alone, not the reasoning. End to end: `gateway serve` on SQLite.
func TestStoredReasoningNotSentBack(t *testing.T) {
	up := upstreamtest.New(t, upstreamtest.Chat(upstreamtest.Reply{
		Content: "<think>The user may mean Lyon; recall the Marseille harbour too.</think>\n\nParis is the capital of France."}))
	gw := serveDialects(t, up.URL(), up.URL())
	who := map[string]string{"Authorization": "Bearer sk-test", "X-Memory-User": "thea", "X-Memory-Conversation": "geo"}
	status, b := postJSON(t, gw+"/v1/chat/completions", `{"model":"local-model","messages":[{"role":"user","content":"What is the capital of France?"}]}`, who)
	if status != 200 {
		t.Fatalf("turn 1: %d %s", status, b)
	}
	eventually(t, "the reply to be stored", func() bool { return storedCount(t, gw, "thea", "geo") >= 2 })
	status, b = postJSON(t, gw+"/v1/chat/completions", `{"model":"local-model","messages":[{"role":"user","content":"And of Spain?"}]}`, who)
	if status != 200 {
		t.Fatalf("turn 2: %d %s", status, b)
	}
	sent := string(up.Last(t).Body)
	if !strings.Contains(sent, "What is the capital of France?") || !strings.Contains(sent, "Paris is the capital of France.") || !strings.Contains(sent, "And of Spain?") {
		t.Errorf("upstream request lacks the history:\n%s", sent)
	}
	if strings.Contains(sent, "Lyon") || strings.Contains(sent, "think>") {
		t.Errorf("upstream request holds the stored reply's reasoning:\n%s", sent)
	}
	var conv struct {
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	apiCall(t, http.MethodGet, gw+"/v1/memory/conversations/geo?user=thea", nil, nil, &conv)
	if len(conv.Messages) < 2 || !strings.HasPrefix(conv.Messages[1].Content, "<think>The user may mean Lyon") {
		t.Errorf("inspector shows %+v, want the reply as relayed", conv.Messages)
	}
}
