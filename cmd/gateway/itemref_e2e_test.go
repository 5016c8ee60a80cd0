package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestResponsesItemReferenceHistory: the Vercel AI SDK's OpenAI provider
// (@ai-sdk/openai, the Responses API by default, store true) resends a
// conversation's earlier assistant messages as item references:
// [user, {"type":"item_reference","id":<the reply's message id>}, user].
// End to end through `gateway serve`: the second request goes upstream as
// the client sent it plus memory — no stored turn repeating the first
// exchange before it — and the conversation holds each message once.
func TestResponsesItemReferenceHistory(t *testing.T) {
	fake, gw := serveRecallDialects(t)
	headers := map[string]string{"Authorization": "Bearer sk-test", "X-Memory-User": "ana", "X-Memory-Conversation": "ai-sdk"}

	const first = `{"type":"message","role":"user","content":"I live in Lisbon and I love trains."}`
	status, b := postJSON(t, gw+"/v1/responses", `{"model":"gpt-4o-mini","input":[`+first+`]}`, headers)
	if status != http.StatusOK {
		t.Fatalf("first: %d %s", status, b)
	}
	var reply struct {
		Output []struct {
			ID   string `json:"id"`
			Type string `json:"type"`
		} `json:"output"`
	}
	if err := json.Unmarshal(b, &reply); err != nil || len(reply.Output) != 1 || reply.Output[0].Type != "message" {
		t.Fatalf("first reply %s", b)
	}
	type stored struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	conversation := func() stored {
		var c stored
		apiCall(t, http.MethodGet, gw+"/v1/memory/conversations/ai-sdk?user=ana", nil, nil, &c)
		return c
	}
	eventually(t, "the first exchange to be stored", func() bool { return len(conversation().Messages) == 2 })

	input := `[` + first + `,{"type":"item_reference","id":"` + reply.Output[0].ID + `"},` +
		`{"role":"user","content":[{"type":"input_text","text":"Where do I live?"}]}]`
	status, b = postJSON(t, gw+"/v1/responses", `{"model":"gpt-4o-mini","stream":true,"input":`+input+`}`, headers)
	if status != http.StatusOK || !strings.Contains(string(b), "You said: Where do I live?") {
		t.Fatalf("second: %d %s", status, b)
	}
	reqs := fake.Requests()
	var sent struct {
		Input        json.RawMessage `json:"input"`
		Instructions string          `json:"instructions"`
	}
	if err := json.Unmarshal(reqs[len(reqs)-1].Body, &sent); err != nil {
		t.Fatal(err)
	}
	var items []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	json.Unmarshal(sent.Input, &items)
	var users int
	for _, it := range items {
		if it.Role == "user" && strings.Contains(string(it.Content), "I live in Lisbon and I love trains.") {
			users++
		}
	}
	if users != 1 {
		t.Errorf("the first message went upstream %d times, want once: %s", users, sent.Input)
	}
	eventually(t, "the second exchange to be stored", func() bool { return len(conversation().Messages) >= 4 })
	c := conversation()
	var got []string
	for _, m := range c.Messages {
		got = append(got, m.Role+": "+m.Content)
	}
	want := []string{"user: I live in Lisbon and I love trains.", "assistant: You said: I live in Lisbon and I love trains.",
		"user: Where do I live?", "assistant: You said: Where do I live?"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stored conversation:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
