package dialecttest

import (
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/dialect/anthropic"
	"github.com/memgate/memgate/internal/dialect/chat"
	"github.com/memgate/memgate/internal/dialect/responses"
	"github.com/memgate/memgate/internal/memory"
)

// TestLyingUsageKeepsTheReply: a reply whose usage counts are out of range,
// fractional or not numbers at all is still read, its usage counted as 0,
// so the turn is captured. Strictly decoded, one bad count failed the whole
// reply and the user's turn was lost.
func TestLyingUsageKeepsTheReply(t *testing.T) {
	const bad = `1e30`
	for _, tc := range []struct {
		name string
		read func([]byte) (memory.Message, *memory.Usage, error)
		body string
	}{
		{"chat", chat.ReplyFromJSON, `{"choices":[{"index":0,"message":{"role":"assistant","content":"hello there"},"finish_reason":"stop"}],
			"usage":{"prompt_tokens":` + bad + `,"completion_tokens":99999999999999999999,"total_tokens":-3,"prompt_tokens_details":{"cached_tokens":"x"}}}`},
		{"chat, usage not an object", chat.ReplyFromJSON, `{"choices":[{"index":0,"message":{"role":"assistant","content":"hello there"},"finish_reason":"stop"}],"usage":"lots"}`},
		{"anthropic", anthropic.ReplyFromJSON, `{"type":"message","role":"assistant","content":[{"type":"text","text":"hello there"}],
			"usage":{"input_tokens":` + bad + `,"output_tokens":1.5,"cache_read_input_tokens":99999999999999999999}}`},
		{"responses", responses.ReplyFromJSON, `{"object":"response","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"hello there"}]}],
			"usage":{"input_tokens":` + bad + `,"output_tokens":-1,"input_tokens_details":{"cached_tokens":"x"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg, u, err := tc.read([]byte(tc.body))
			if err != nil {
				t.Fatalf("reply refused: %v", err)
			}
			if !strings.Contains(msg.Content, "hello there") {
				t.Errorf("content = %q", msg.Content)
			}
			if u != nil && (u.PromptTokens != 0 || u.CompletionTokens < 0 || u.TotalTokens < 0 || u.CachedTokens != 0) {
				t.Errorf("usage = %+v, want the bad counts read as 0", *u)
			}
		})
	}
}

func TestTokenCount(t *testing.T) {
	for in, want := range map[string]memory.TokenCount{
		`12`: 12, `0`: 0, `-1`: 0, `1.5`: 0, `1e3`: 0, `"7"`: 0, `null`: 0,
		`2147483647`: 2147483647, `2147483648`: 0, `99999999999999999999`: 0,
	} {
		var c memory.TokenCount = 99
		if err := c.UnmarshalJSON([]byte(in)); err != nil || c != want {
			t.Errorf("TokenCount(%s) = %d, %v; want %d", in, c, err, want)
		}
	}
}
