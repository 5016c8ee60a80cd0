package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/dialect/dialecttest"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// chatAndResponses is an OpenAI upstream: the Responses API of the
// dialecttest provider fake (which enforces that API's rules) and chat
// completions from chat.
func chatAndResponses(fake *dialecttest.Upstream, chat http.Handler) http.Handler {
	fakeURL, _ := url.Parse(fake.URL)
	toFake := httputil.NewSingleHostReverseProxy(fakeURL)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/responses" {
			toFake.ServeHTTP(w, r)
			return
		}
		chat.ServeHTTP(w, r)
	})
}

// serveRecallDialects runs serveDialects with the dialecttest provider
// fake as the Anthropic upstream and the Responses API, recallUpstream
// answering chat completions, and returns the fake and the gateway's base
// URL.
func serveRecallDialects(t *testing.T) (*dialecttest.Upstream, string) {
	t.Helper()
	fake := dialecttest.NewUpstream(t)
	openai := upstreamtest.New(t, chatAndResponses(fake, recallUpstream()))
	return fake, serveDialects(t, openai.URL(), fake.URL+"/v1")
}

// serveDialects runs `gateway serve` (the real run, SQLite store, default
// memory, recall and capture worker) on a free port with the OpenAI
// upstream at openai and the Anthropic upstream at anthropic, and returns
// its base URL once /healthz answers.
func serveDialects(t *testing.T, openai, anthropic string) string {
	t.Helper()
	// Loading memory is not what is measured: a loaded -race machine must
	// not degrade requests past the default 150ms.
	return serveConfigured(t, "memory:\n  load_timeout: 10s\ncompaction:\n  enabled: false\n",
		map[string]string{"GATEWAY_UPSTREAM_BASE_URL": openai, "GATEWAY_ANTHROPIC_BASE_URL": anthropic})
}

// postJSON posts body to url with headers and returns the status and body.
func postJSON(t *testing.T, url, body string, headers map[string]string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestFactAcrossAPIs: a fact said through the Anthropic Messages API (a
// streamed request, as Claude apps send) is found in the upstream prompt of
// a later OpenAI Responses call and of a later chat completion of the same
// user, each in a new conversation — one memory behind three APIs. Run
// end to end: the real `gateway serve` with its SQLite store, capture
// worker, recall and fact extraction, in front of the dialecttest fake
// provider (Messages, Responses) and a chat upstream.
func TestFactAcrossAPIs(t *testing.T) {
	fake := dialecttest.NewUpstream(t)
	fakeURL, _ := url.Parse(fake.URL)
	toFake := httputil.NewSingleHostReverseProxy(fakeURL)
	chatUp := recallUpstream()
	openai := upstreamtest.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/responses" {
			toFake.ServeHTTP(w, r)
			return
		}
		chatUp.ServeHTTP(w, r)
	}))
	gw := serveDialects(t, openai.URL(), fake.URL+"/v1")

	const stated = "I am vegetarian and I live in Lisbon, near the old town."
	const question = "Can you recommend a vegetarian dinner place in Lisbon tonight?"
	who := func(conv string) map[string]string {
		return map[string]string{"X-Memory-User": "ana", "X-Memory-Conversation": conv}
	}

	claude := map[string]string{"X-Api-Key": "sk-ant-test", "Anthropic-Version": "2023-06-01"}
	for k, v := range who("claude-chat") {
		claude[k] = v
	}
	status, b := postJSON(t, gw+"/v1/messages", `{"model":"claude-sonnet-4-6","max_tokens":256,"stream":true,`+
		`"system":"You are a local guide.","messages":[{"role":"user","content":"`+stated+`"}]}`, claude)
	if status != 200 || !bytes.Contains(b, []byte("event: message_stop")) {
		t.Fatalf("messages: %d %s", status, b)
	}
	// The exchange is stored, indexed and its facts extracted by the
	// capture worker; wait until search finds it.
	eventually(t, "the statement to be searchable", func() bool {
		var res struct {
			Data []struct {
				Text string `json:"text"`
			} `json:"data"`
		}
		apiCall(t, http.MethodPost, gw+"/v1/memory/search", nil, map[string]any{"user": "ana", "query": "vegetarian Lisbon"}, &res)
		for _, it := range res.Data {
			if strings.Contains(it.Text, "vegetarian") {
				return true
			}
		}
		return false
	})

	status, b = postJSON(t, gw+"/v1/responses", `{"model":"gpt-4.1","instructions":"Be brief.","input":"`+question+`"}`,
		map[string]string{"Authorization": "Bearer sk-test", "X-Memory-User": "ana", "X-Memory-Conversation": "responses-chat"})
	if status != 200 {
		t.Fatalf("responses: %d %s", status, b)
	}
	var resp struct {
		Instructions string          `json:"instructions"`
		Input        json.RawMessage `json:"input"`
	}
	reqs := fake.Requests()
	last := reqs[len(reqs)-1]
	if last.Path != "/v1/responses" {
		t.Fatalf("last fake request %s", last.Path)
	}
	if err := json.Unmarshal(last.Body, &resp); err != nil {
		t.Fatal(err)
	}
	// The passage recalled for this question is a developer item right
	// before the question; what was pinned joins the instructions.
	if !strings.Contains(resp.Instructions+string(resp.Input), stated) || !strings.HasPrefix(resp.Instructions, "Be brief.") {
		t.Errorf("the fact said through /v1/messages is not in the Responses memory:\n%s\n%s", resp.Instructions, resp.Input)
	}
	if strings.Contains(string(resp.Input), "local guide") {
		t.Errorf("another conversation's turns were sent as input: %s", resp.Input)
	}

	if r := chat(t, gw, who("openai-chat"), false, user(question)); r.Status != http.StatusOK {
		t.Fatalf("chat: %d %s", r.Status, r.Body)
	}
	if prompt := lastChatPrompt(t, openai); !strings.Contains(prompt, stated) {
		t.Errorf("the fact said through /v1/messages is not in the chat prompt:\n%s", prompt)
	}

	// The Claude exchange itself was stored like a chat one, reply included.
	var conv struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	apiCall(t, http.MethodGet, gw+"/v1/memory/conversations/claude-chat?user=ana", nil, nil, &conv)
	if len(conv.Messages) < 2 || conv.Messages[0].Content != stated || conv.Messages[1].Role != "assistant" ||
		!strings.HasPrefix(conv.Messages[1].Content, "You said: ") {
		t.Errorf("stored Claude conversation %+v", conv)
	}
}
