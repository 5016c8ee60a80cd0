package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/dialect/dialecttest"
)

// What Claude clients send beside plain text: a block system prompt and
// tools carrying cache_control, extended thinking (a thinking block with
// the provider's signature in the history, which the provider refuses
// modified), base64 images and documents, a tool_result with is_error,
// stop_sequences and metadata.user_id.
const (
	featSystem   = `[{"type":"text","text":"You are a careful travel assistant.","cache_control":{"type":"ephemeral"}}]`
	featTools    = `[{"name":"get_weather","description":"Current weather for a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"cache_control":{"type":"ephemeral"}}]`
	featUser     = `{"role":"user","content":[{"type":"text","text":"I live in Lisbon. What is the weather here, and what is in this photo and this PDF?"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="}},{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0xLjQKJcOkw7zDtsOfCjEgMCBvYmoKPDwvVHlwZS9DYXRhbG9nPj4KZW5kb2JqCnRyYWlsZXIKPDwvUm9vdCAxIDAgUj4+CiUlRU9G"}}]}`
	featThinking = `{"type":"thinking","thinking":"The user is in Lisbon; I should call the weather tool.\n\nThen describe the image.","signature":"EqQBCkYIBxgCKkDv0Lh+E0Y2q4wz0Yj7m4Jt1vQ3yL8aP0wX3p2bK8r9m1tZc4n5s6d7f8g9h0j1k2l3m4n5o6p7q8r9s0t1u2v3w=="}`
	featRest     = `"model":"claude-sonnet-4-5","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},` +
		`"stop_sequences":["\n\nHuman:"],"metadata":{"user_id":"u-123"},"system":` + featSystem + `,"tools":` + featTools
)

// TestAnthropicClientFeatures: a three-request Claude conversation
// through `gateway serve` — a question with an image and a document, the
// tool loop answering it (an assistant turn with a signed thinking block,
// a failed tool_result), then a new question resending it all with the
// client's own cache breakpoint on its last block, then one more.
// Upstream, every
// client message before the question is byte for byte the client's (the
// thinking block above all), the system prompt keeps the client's cached
// block first and whole with memory after it, tools, thinking,
// stop_sequences and metadata are the client's, and the fourth request
// repeats the third up to its question, recalled block included (so the
// client's breakpoint there is read back from the cache).
func TestAnthropicClientFeatures(t *testing.T) {
	fake, gw, headers, post := claudeGateway(t, "claude-features")
	type sent struct {
		System   json.RawMessage   `json:"system"`
		Tools    json.RawMessage   `json:"tools"`
		Thinking json.RawMessage   `json:"thinking"`
		Stop     json.RawMessage   `json:"stop_sequences"`
		Metadata json.RawMessage   `json:"metadata"`
		Messages []json.RawMessage `json:"messages"`
		all      string            // the messages, one a line
	}
	upstream := func() sent {
		t.Helper()
		reqs := fake.Requests()
		var s sent
		if err := json.Unmarshal(reqs[len(reqs)-1].Body, &s); err != nil {
			t.Fatal(err)
		}
		for _, m := range s.Messages {
			s.all += string(m) + "\n"
		}
		return s
	}

	// Something to recall, said in another conversation of the user.
	earlier := map[string]string{}
	for k, v := range headers {
		earlier[k] = v
	}
	earlier["X-Memory-Conversation"] = "claude-earlier"
	if status, b := postJSON(t, gw+"/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":256,"messages":[{"role":"user","content":"My dog is called Rex and he loves the beach."}]}`, earlier); status != http.StatusOK {
		t.Fatalf("%d %s", status, b)
	}
	searchable(t, gw, "the earlier conversation", "dog Rex beach", "Rex")

	post(featUser)
	call := `{"role":"assistant","content":[` + featThinking + `,{"type":"text","text":"Let me check the weather."},` +
		`{"type":"tool_use","id":"toolu_fake0001","name":"get_weather","input":{"city":"Porto"}}]}`
	result := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_fake0001","is_error":true,"content":"weather service unavailable","cache_control":{"type":"ephemeral"}}]}`
	post(featUser + "," + call + "," + result)
	second := upstream()

	// The replies the client resends are the provider's (an edited one
	// would start a new branch).
	answer := `{"role":"assistant","content":[{"type":"text","text":"The tool says: weather service unavailable."}]}`
	result3 := strings.Replace(result, `,"cache_control":{"type":"ephemeral"}`, "", 1)
	question := `{"role":"user","content":[{"type":"text","text":"Where do I live, and what is my dog called?","cache_control":{"type":"ephemeral"}}]}`
	client := []string{featUser, call, result3, answer, question}
	post(strings.Join(client, ","))
	third := upstream()

	for name, s := range map[string]sent{"second": second, "third": third} {
		for field, pair := range map[string][2]string{"tools": {string(s.Tools), featTools}, "thinking": {string(s.Thinking), `{"type":"enabled","budget_tokens":1024}`},
			"stop_sequences": {string(s.Stop), `["\n\nHuman:"]`}, "metadata": {string(s.Metadata), `{"user_id":"u-123"}`}} {
			if pair[0] != pair[1] {
				t.Errorf("%s request: %s upstream %s, want the client's %s", name, field, pair[0], pair[1])
			}
		}
		var system []json.RawMessage
		if err := json.Unmarshal(s.System, &system); err != nil || len(system) < 1 || !jsonSame(system[0], featSystem[1:len(featSystem)-1]) {
			t.Errorf("%s request: system %s, want the client's cached block first", name, s.System)
		}
		if !strings.Contains(s.all, featThinking) {
			t.Errorf("%s request: the signed thinking block is not upstream byte for byte: %s", name, s.all)
		}
	}
	if !strings.Contains(string(third.System)+third.all, "Rex") {
		t.Errorf("third request carries no memory: %s %s", third.System, third.all)
	}
	// The messages before the question are the client's own, in place
	// (only what a request recalled rides in its question's message).
	// The first question goes as the tool loop's request sent it, with
	// the block it recalled then (it opened the conversation, resending
	// no history), so the third request repeats the second's prefix.
	if len(third.Messages) != len(client) {
		t.Fatalf("third request: %d messages upstream, want the client's %d:\n%s", len(third.Messages), len(client), third.all)
	}
	if !jsonSame(third.Messages[0], string(second.Messages[0])) || !strings.Contains(string(third.Messages[0]), "<memory>") {
		t.Errorf("third request: the first question upstream\n%s\nwant it as the second request sent it, with its recalled block:\n%s", third.Messages[0], second.Messages[0])
	}
	for i := 1; i < len(client)-1; i++ {
		if !jsonSame(third.Messages[i], client[i]) {
			t.Errorf("third request: message %d upstream %s, want the client's %s", i, third.Messages[i], client[i])
		}
	}
	// The next question resends it all, the previous question keeping its
	// breakpoint (as Anthropic advises: the last two user messages): the
	// history through that question goes as the third request sent it,
	// the block it was sent with in place, so that breakpoint is read back.
	answer3 := `{"role":"assistant","content":[{"type":"text","text":"You said: Where do I live, and what is my dog called?"}]}`
	question4 := `{"role":"user","content":[{"type":"text","text":"And what does Rex love?","cache_control":{"type":"ephemeral"}}]}`
	post(strings.Join(append(client, answer3, question4), ","))
	fourth := upstream()
	if len(fourth.Messages) != len(third.Messages)+2 {
		t.Fatalf("fourth request: %d messages upstream, want %d", len(fourth.Messages), len(third.Messages)+2)
	}
	for i := range third.Messages {
		if !jsonSame(fourth.Messages[i], string(third.Messages[i])) {
			t.Errorf("message %d changed between requests, a cache miss from there on:\nthird  %s\nfourth %s", i, third.Messages[i], fourth.Messages[i])
		}
	}
	if !strings.Contains(string(fourth.Messages[len(fourth.Messages)-1]), "Rex") {
		t.Errorf("fourth request: the question carries no recall: %s", fourth.Messages[len(fourth.Messages)-1])
	}
}

// claudeGateway runs `gateway serve` before the dialecttest fake and
// returns the fake, the gateway's URL, the headers of a Claude client's
// requests in conversation conv, and a post of a streamed featRest body
// with messages, which fails the test unless the stream completes.
func claudeGateway(t *testing.T, conv string) (*dialecttest.Upstream, string, map[string]string, func(messages string)) {
	t.Helper()
	fake, gw := serveRecallDialects(t)
	headers := map[string]string{"X-Api-Key": "sk-ant-test", "Anthropic-Version": "2023-06-01",
		"X-Memory-User": "ana", "X-Memory-Conversation": conv}
	post := func(messages string) {
		t.Helper()
		status, b := postJSON(t, gw+"/v1/messages", `{`+featRest+`,"stream":true,"messages":[`+messages+`]}`, headers)
		if status != http.StatusOK || !bytes.Contains(b, []byte("event: message_stop")) {
			t.Fatalf("%d %s", status, b)
		}
	}
	return fake, gw, headers, post
}

// searchable waits until ana's best search hit for query holds want:
// what was said is indexed.
func searchable(t *testing.T, gw, what, query, want string) {
	t.Helper()
	eventually(t, what+" to be searchable", func() bool {
		var res struct {
			Data []struct {
				Text string `json:"text"`
			} `json:"data"`
		}
		apiCall(t, http.MethodPost, gw+"/v1/memory/search", nil, map[string]any{"user": "ana", "query": query}, &res)
		return len(res.Data) > 0 && strings.Contains(res.Data[0].Text, want)
	})
}

// jsonSame reports whether a and b are the same JSON bytes once
// whitespace between tokens is removed.
func jsonSame(a json.RawMessage, b string) bool {
	var x, y bytes.Buffer
	if json.Compact(&x, a) != nil || json.Compact(&y, []byte(b)) != nil {
		return false
	}
	return bytes.Equal(x.Bytes(), y.Bytes())
}

// TestAnthropicToolLoopOwnCallNotDoubled: a tool loop whose call the
// client holds otherwise than memgate stored it (here another id and
// input: regenerated) resends its question; upstream the question goes
// once, the client's — not also the stored copy joined into it, which gave
// the provider every block of it twice (image and document included).
func TestAnthropicToolLoopOwnCallNotDoubled(t *testing.T) {
	fake, gw, _, post := claudeGateway(t, "claude-regenerated")
	post(featUser)
	var conv struct {
		Messages []json.RawMessage `json:"messages"`
	}
	eventually(t, "the first exchange to be stored", func() bool {
		apiCall(t, http.MethodGet, gw+"/v1/memory/conversations/claude-regenerated?user=ana", nil, nil, &conv)
		return len(conv.Messages) == 2
	})
	// Indexed too: recall finds the question, which the client resends.
	searchable(t, gw, "the first exchange", "weather Lisbon photo PDF", "What is the weather here")
	call := `{"role":"assistant","content":[` + featThinking + `,{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{"city":"Lisbon"}}]}`
	result := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","is_error":true,"content":"weather service unavailable"}]}`
	post(featUser + "," + call + "," + result)
	reqs := fake.Requests()
	body := string(reqs[len(reqs)-1].Body)
	if n := strings.Count(body, "What is the weather here"); n != 1 {
		t.Errorf("the question went upstream %d times, want once: %s", n, body)
	}
}
