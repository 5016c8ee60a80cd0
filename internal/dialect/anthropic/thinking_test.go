package anthropic

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/dialect/dialecttest"
	"github.com/memgate/memgate/internal/engine/record"
)

// TestRenderReplaysSignedThinking: a client that sends only its newest
// message, extended thinking on, answers a stored tool call with its
// result. The replayed call's assistant turn starts with the signed
// reasoning stored with it (thinking, redacted_thinking), text and
// signature as the provider gave them, as Anthropic requires; reasoning
// the redactor changed or storing sanitized (whose signature the API
// would refuse) and a turn of reasoning alone are not replayed. A call without signed reasoning
// to send back goes with thinking disabled for that step, which Anthropic
// would otherwise refuse.
func TestRenderReplaysSignedThinking(t *testing.T) {
	const body = `{"model":"claude-sonnet-4-5","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},` +
		`"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],` +
		`"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_a","content":"18C"}]}]}`
	signed := `[{"type":"thinking","thinking":"Porto \"weather\": call the tool.","signature":"EqQBsig=="},{"type":"redacted_thinking","data":"EmwKAhgBEgy3"}]`
	call := func(thinking string) json.RawMessage {
		m := map[string]any{"role": "assistant", "content": "Let me check.", "reasoning_content": "Porto",
			"tool_calls": []any{map[string]any{"id": "toolu_a", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city":"Porto"}`}}}}
		if thinking != "" {
			m["thinking_blocks"] = json.RawMessage(thinking)
		}
		return dialecttest.JSON(t, m)
	}
	question := dialecttest.JSON(t, map[string]any{"role": "user", "content": "Weather in Porto?"})
	thoughtOnly := dialecttest.JSON(t, map[string]any{"role": "assistant", "content": "", "thinking_blocks": json.RawMessage(`[{"type":"thinking","thinking":"hm","signature":"s"}]`)})
	for _, tc := range []struct {
		name   string
		stored []json.RawMessage
		want   string // the replayed call's first block; "" when it is the text
	}{
		{"signed", []json.RawMessage{question, call(signed)}, `{"type":"thinking","thinking":"Porto \"weather\": call the tool.","signature":"EqQBsig=="}`},
		{"none stored", []json.RawMessage{question, call("")}, ""},
		{"redacted since", []json.RawMessage{question, call(`[{"type":"thinking","thinking":"key [redacted:api_key]","signature":"EqQBsig=="}]`)}, ""},
		// An operator's redaction pattern (capture.redact_patterns)
		// applies to every string of a stored reply: a signature or a
		// redacted block's data it changed would be refused too.
		{"signature redacted since", []json.RawMessage{question, call(`[{"type":"thinking","thinking":"call it","signature":"EqQB[redacted:b64]"}]`)}, ""},
		{"data redacted since", []json.RawMessage{question, call(`[{"type":"redacted_thinking","data":"Emw[redacted:b64]"}]`)}, ""},
		// Storing sanitizes a reply (record.SanitizeRaw): a NUL in the
		// signed text becomes U+FFFD, as invalid UTF-8 would, and the API
		// would refuse the signature.
		{"sanitized since", []json.RawMessage{question, sanitized(t, call(`[{"type":"thinking","thinking":"Porto\u0000 call it","signature":"EqQBsig=="}]`))}, ""},
		{"data sanitized since", []json.RawMessage{question, sanitized(t, call(`[{"type":"redacted_thinking","data":"Emw\u0000KAhg"}]`))}, ""},
		{"replacement stored", []json.RawMessage{question, call(`[{"type":"thinking","thinking":"Porto \ufffd call it","signature":"EqQBsig=="}]`)}, ""},
		// Stored reasoning goes back with its own members only (a client's
		// own assistant message, stored as sent, may carry others).
		{"other members", []json.RawMessage{question, call(strings.Replace(signed, `"signature"`, `"text":"Obey me.","id":"x","signature"`, 1))},
			`{"type":"thinking","thinking":"Porto \"weather\": call the tool.","signature":"EqQBsig=="}`},
		{"reasoning alone before", []json.RawMessage{question, thoughtOnly, dialecttest.JSON(t, map[string]any{"role": "user", "content": "Still there?"}), call(signed)},
			`{"type":"thinking","thinking":"Porto \"weather\": call the tool.","signature":"EqQBsig=="}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			out, err := r.Render(dialecttest.Prepared(r.Conversation, "", tc.stored, 0))
			if err != nil {
				t.Fatal(err)
			}
			if err := checkRules(out); err != nil {
				t.Errorf("%v:\n%s", err, out)
			}
			var sent struct {
				Messages []struct {
					Role    string            `json:"role"`
					Content []json.RawMessage `json:"content"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(out, &sent); err != nil {
				t.Fatal(err)
			}
			n := len(sent.Messages)
			if n < 2 || sent.Messages[n-2].Role != "assistant" {
				t.Fatalf("no replayed call before the result:\n%s", out)
			}
			for _, m := range sent.Messages[:n-2] {
				if strings.Contains(string(mustJSON(t, m.Content)), `"hm"`) {
					t.Errorf("a turn of reasoning alone was replayed:\n%s", out)
				}
			}
			first := string(sent.Messages[n-2].Content[0])
			var th struct {
				Thinking json.RawMessage `json:"thinking"`
			}
			json.Unmarshal(out, &th)
			if tc.want == "" {
				// Nothing signed to send back: this step goes without
				// thinking, which Anthropic would refuse the call without.
				if strings.Contains(string(mustJSON(t, sent.Messages[n-2].Content)), "thinking") || string(th.Thinking) != `{"type":"disabled"}` {
					t.Errorf("reasoning replayed, or thinking left on (%s) for a call without its signed reasoning: %s", th.Thinking, out)
				}
				return
			}
			if string(th.Thinking) != `{"type":"enabled","budget_tokens":1024}` {
				t.Errorf("thinking upstream %s, want the client's", th.Thinking)
			}
			if !jsonSameBytes(first, tc.want) || !strings.Contains(string(mustJSON(t, sent.Messages[n-2].Content[1])), `"redacted_thinking","data":"EmwKAhgBEgy3"`) {
				t.Errorf("the replayed call starts %s, want its signed reasoning %s, then the redacted block:\n%s", first, tc.want, out)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// jsonSameBytes reports whether a and b decode to the same value.
func jsonSameBytes(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

// sanitized returns raw as the store keeps it (record.SanitizeRaw), which
// must have changed it.
func sanitized(t *testing.T, raw json.RawMessage) json.RawMessage {
	t.Helper()
	out, changed := record.SanitizeRaw(raw)
	if !changed {
		t.Fatalf("storing left %s as it was", raw)
	}
	return out
}

// TestRenderReplaysProviderReplacementChar: a U+FFFD the provider wrote
// in its signed reasoning is part of what it signed, not a mark of
// storing: a reply captured so (whole or streamed) is replayed with its
// blocks and thinking stays on. The same blocks altered since (a NUL
// sanitized into U+FFFD, a secret redacted) are still not replayed.
func TestRenderReplaysProviderReplacementChar(t *testing.T) {
	const whole = `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[` +
		`{"type":"thinking","thinking":"Porto \ufffd weather: call the tool.","signature":"EqQBsig=="},` +
		`{"type":"redacted_thinking","data":"EmwKAhgBEgy3"},` +
		`{"type":"tool_use","id":"toolu_a","name":"get_weather","input":{"city":"Porto"}}],` +
		`"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":5}}`
	streamed := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Porto \\ufffd weather: \"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"call the tool.\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"EqQBsig==\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"EmwKAhgBEgy3\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_a\",\"name\":\"get_weather\",\"input\":{}}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\":\\\"Porto\\\"}\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":5}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	fromWhole, _, err := ReplyFromJSON([]byte(whole))
	if err != nil {
		t.Fatal(err)
	}
	fromStream, _, err := dialecttest.Feed(NewStream(0), []byte(streamed), 7).Result()
	if err != nil {
		t.Fatal(err)
	}
	redacted := json.RawMessage(strings.Replace(string(fromWhole.Raw), "call the tool.", "[redacted:api_key]", 2))
	nul := json.RawMessage(strings.Replace(string(fromWhole.Raw), "call the tool.", `call\u0000 the tool.`, 2))
	const body = `{"model":"claude-sonnet-4-5","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":1024},` +
		`"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],` +
		`"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_a","content":"18C"}]}]}`
	question := dialecttest.JSON(t, map[string]any{"role": "user", "content": "Weather in Porto?"})
	for _, tc := range []struct {
		name   string
		stored json.RawMessage
		replay bool
	}{
		{"whole", fromWhole.Raw, true},
		{"streamed", fromStream.Raw, true},
		{"redacted since", redacted, false},
		{"sanitized since", sanitized(t, nul), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			out, err := r.Render(dialecttest.Prepared(r.Conversation, "", []json.RawMessage{question, tc.stored}, 0))
			if err != nil {
				t.Fatal(err)
			}
			replayed := strings.Contains(string(out), `"signature":"EqQBsig=="`) && strings.Contains(string(out), `"data":"EmwKAhgBEgy3"`)
			if replayed != tc.replay || r.ThinkingDisabled() == tc.replay {
				t.Errorf("signed reasoning replayed %v, thinking disabled %v; want replayed %v:\n%s", replayed, r.ThinkingDisabled(), tc.replay, out)
			}
			if tc.replay && !strings.Contains(string(out), "Porto \ufffd weather: call the tool.") {
				t.Errorf("the provider's text is not replayed as signed:\n%s", out)
			}
		})
	}
}
