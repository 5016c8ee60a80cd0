package memory

import (
	"encoding/json"
	"testing"
)

// TestUsageCachedTokens: a chat completion's usage gives its cached
// prompt tokens (prompt_tokens_details.cached_tokens) as CachedTokens, and
// a Usage encoded by memgate decodes the same.
func TestUsageCachedTokens(t *testing.T) {
	for raw, want := range map[string]Usage{
		`{"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,"prompt_tokens_details":{"cached_tokens":1920,"audio_tokens":0}}`: {PromptTokens: 2006, CompletionTokens: 300, TotalTokens: 2306, CachedTokens: 1920},
		`{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}`:                                                                       {PromptTokens: 9, CompletionTokens: 12, TotalTokens: 21},
		`{"prompt_tokens":9,"cached_tokens":4}`:                                                                                              {PromptTokens: 9, CachedTokens: 4},
	} {
		var u Usage
		if err := json.Unmarshal([]byte(raw), &u); err != nil || u != want {
			t.Errorf("%s: %+v, %v; want %+v", raw, u, err, want)
		}
		b, _ := json.Marshal(u)
		var again Usage
		if err := json.Unmarshal(b, &again); err != nil || again != want {
			t.Errorf("%s: round trip %+v", raw, again)
		}
	}
}
