package anthropic

import (
	"encoding/json"
	"fmt"

	"github.com/memgate/memgate/internal/dialect/chat"
	"github.com/memgate/memgate/internal/memory"
)

// usage is Anthropic's usage object. The prompt is every input token the
// request was billed for: uncached, written to and read from the cache.
type usage struct {
	InputTokens              *memory.TokenCount `json:"input_tokens"`
	OutputTokens             *memory.TokenCount `json:"output_tokens"`
	CacheCreationInputTokens *memory.TokenCount `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *memory.TokenCount `json:"cache_read_input_tokens"`
}

// merge overwrites the fields u2 carries (message_delta repeats the counts
// cumulatively).
func (u *usage) merge(u2 *usage) {
	if u2 == nil {
		return
	}
	for _, f := range [][2]**memory.TokenCount{
		{&u.InputTokens, &u2.InputTokens}, {&u.OutputTokens, &u2.OutputTokens},
		{&u.CacheCreationInputTokens, &u2.CacheCreationInputTokens}, {&u.CacheReadInputTokens, &u2.CacheReadInputTokens},
	} {
		if *f[1] != nil {
			*f[0] = *f[1]
		}
	}
}

// memory converts u to memgate's usage (nil when nothing was reported).
func (u usage) memory() *memory.Usage {
	if u.InputTokens == nil && u.OutputTokens == nil {
		return nil
	}
	n := func(p *memory.TokenCount) int {
		if p == nil {
			return 0
		}
		return int(*p)
	}
	mu := chat.Usage(n(u.InputTokens)+n(u.CacheCreationInputTokens)+n(u.CacheReadInputTokens), n(u.OutputTokens))
	mu.CachedTokens = n(u.CacheReadInputTokens)
	return mu
}

// ReplyFromJSON reads a non-streamed Messages API response and returns the
// reply as the chat assistant message memgate stores (text blocks as
// content, tool_use blocks as tool_calls, thinking as reasoning_content) and
// the usage (nil when absent). It fails with memory.ErrInvalid when the body
// is not a message (an error body included).
func ReplyFromJSON(b []byte) (memory.Message, *memory.Usage, error) {
	var resp struct {
		Type    string  `json:"type"`
		Role    string  `json:"role"`
		Content []block `json:"content"`
		Usage   *usage  `json:"usage"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		return memory.Message{}, nil, fmt.Errorf("%w: message body: %v", memory.ErrInvalid, err)
	}
	if resp.Type != "message" {
		return memory.Message{}, nil, fmt.Errorf("%w: body is a %q, not a message", memory.ErrInvalid, resp.Type)
	}
	msg, err := chat.Encode(assistantMessage(resp.Content, memory.Lossless(b)))
	if err != nil {
		return memory.Message{}, nil, err
	}
	var u *memory.Usage
	if resp.Usage != nil {
		u = resp.Usage.memory()
	}
	return msg, u, nil
}
