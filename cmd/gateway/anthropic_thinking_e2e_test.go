package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestAnthropicNewOnlyToolLoopWithThinking: a Claude client that sends
// only its newest message, extended thinking on, in a tool loop. Its
// first request asks; the reply (a signed thinking block, then the
// tool_use) is stored. Its second sends only the tool_result (alone, or
// with a text block asking on): memgate
// replays the stored call before it, and Anthropic requires that call's
// assistant turn to start with its thinking block, signature and text as
// the provider gave them (the fake refuses it otherwise, as the API
// does). Streamed and whole replies alike. A call stored without signed
// reasoning (asked with thinking off) is answered with thinking off for
// that step rather than refused.
func TestAnthropicNewOnlyToolLoopWithThinking(t *testing.T) {
	for _, tc := range []struct {
		name          string
		stream, first bool // streamed; the first request thinks
		ask           bool // the tool_result's message asks on in a text block
	}{{"stream", true, true, false}, {"whole", false, true, false}, {"asked without thinking", true, false, false},
		{"results with a question", true, true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			conv := "claude-thinking-" + strings.ReplaceAll(tc.name, " ", "-")
			fake, gw, headers, _ := claudeGateway(t, conv)
			post := func(thinks bool, messages string) []byte {
				t.Helper()
				rest := featRest
				if !thinks {
					rest = strings.Replace(rest, `"thinking":{"type":"enabled","budget_tokens":1024},`, "", 1)
				}
				status, b := postJSON(t, gw+"/v1/messages", `{`+rest+`,"stream":`+map[bool]string{true: "true", false: "false"}[tc.stream]+`,"messages":[`+messages+`]}`, headers)
				if status != http.StatusOK {
					t.Fatalf("%d %s", status, b)
				}
				return b
			}
			reply := post(tc.first, `{"role":"user","content":"What is the weather in Porto?"}`)
			id := regexp.MustCompile(`toolu_fake[0-9]+`).Find(reply)
			if id == nil {
				t.Fatalf("the reply holds no tool call: %s", reply)
			}
			var stored struct {
				Messages []json.RawMessage `json:"messages"`
			}
			eventually(t, "the first exchange to be stored", func() bool {
				apiCall(t, http.MethodGet, gw+"/v1/memory/conversations/"+conv+"?user=ana", nil, nil, &stored)
				return len(stored.Messages) == 2
			})
			ask := ""
			if tc.ask {
				ask = `,{"type":"text","text":"Should I take an umbrella?"}`
			}
			post(true, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"`+string(id)+`","content":"18C and sunny"}`+ask+`]}`)
			reqs := fake.Requests()
			var sent struct {
				Messages []struct {
					Role    string            `json:"role"`
					Content []json.RawMessage `json:"content"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(reqs[len(reqs)-1].Body, &sent); err != nil {
				t.Fatal(err)
			}
			n := len(sent.Messages)
			if !tc.first {
				if !bytes.Contains(reqs[len(reqs)-1].Body, []byte(`"thinking":{"type":"disabled"}`)) {
					t.Errorf("a call stored without signed reasoning went with thinking on: %s", reqs[len(reqs)-1].Body)
				}
				return
			}
			if n < 2 || sent.Messages[n-2].Role != "assistant" || !bytes.Contains(sent.Messages[n-2].Content[0], []byte(`"type":"thinking"`)) ||
				!strings.Contains(string(sent.Messages[n-2].Content[0]), `"signature":"fakesig`) {
				t.Errorf("the replayed call does not start with its signed thinking block: %s", reqs[len(reqs)-1].Body)
			}
		})
	}
}
