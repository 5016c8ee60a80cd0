package fakeupstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// maxSummaryWords bounds the summary summaryCompletion writes.
const maxSummaryWords = 40

// summaryCompletion answers memgate's summariser call (a JSON request whose
// prompt lists "New messages:") with a summary made of the first words of
// those messages: memgate refuses a summary that mentions nothing of the
// conversation (compaction.CheckSummary), so a fixed one would be replaced
// by the extractive fallback and the benchmark would measure a path a real
// model does not take. It returns nil for any other request.
func summaryCompletion(body []byte) []byte {
	if !bytes.Contains(body, []byte("New messages:")) {
		return nil
	}
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	var words []string
	for _, m := range req.Messages {
		_, msgs, ok := strings.Cut(m.Content, "New messages:")
		if m.Role != "user" || !ok {
			continue
		}
		for _, line := range strings.Split(msgs, "\n") {
			_, text, ok := strings.Cut(line, ": ")
			if !ok || strings.HasPrefix(line, "Keep the summary") {
				continue
			}
			for _, w := range strings.Fields(text) {
				if len(words) < maxSummaryWords {
					words = append(words, w)
				}
			}
		}
	}
	if len(words) == 0 {
		return nil
	}
	reply, _ := json.Marshal(map[string]any{ // strings only: cannot fail
		"summary": "The conversation covered: " + strings.Join(words, " "), "key_events": []string{},
		"preserved": map[string][]string{"numbers": {}, "dates": {}, "decisions": {}},
	})
	return fmt.Appendf(nil, `{"id":"chatcmpl-bench-json","object":"chat.completion","created":1700000000,`+
		`"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":%q,"refusal":null},`+
		`"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":120,"completion_tokens":40,"total_tokens":160}}`, reply)
}
