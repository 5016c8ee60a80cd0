package proxy

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// cacheCounts records what the proxy counts per tenant.
type cacheCounts struct {
	mu               sync.Mutex
	repeated, cached map[string]int
}

func (c *cacheCounts) Repeated(tenant string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.repeated[tenant] += n
}

func (c *cacheCounts) Cached(tenant string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cached[tenant] += n
}

func (c *cacheCounts) get() (map[string]int, map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps(c.repeated), maps(c.cached)
}

func maps(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestPrefixRepeatHeader: the second request of a conversation whose prompt
// starts as the first's reports the repeated prompt tokens in
// X-Memory-Prefix-Tokens, in the metric and to the counter; another user's
// or conversation's request with the same prompt repeats nothing (nothing
// crosses users); a prompt that differs from its first byte repeats nothing.
func TestPrefixRepeatHeader(t *testing.T) {
	long := strings.Repeat("The user likes green tea and walks in Lisbon. ", 200) // ~9 KB
	prep := preparerFunc(func(_ context.Context, req memory.Request) (memory.Prepared, error) {
		block, _ := json.Marshal(map[string]string{"role": "system", "content": long})
		msgs := append([]json.RawMessage{block}, memory.Raws(req.Messages)...)
		return memory.Prepared{Messages: msgs, TokensOriginal: 3000, TokensSent: 2000}, nil
	})
	counts := &cacheCounts{repeated: map[string]int{}, cached: map[string]int{}}
	up := upstreamtest.New(t, upstreamtest.Chat(upstreamtest.Reply{Content: "ok", Usage: &upstreamtest.Usage{PromptTokens: 2000, CompletionTokens: 2, CachedTokens: 1536}}))
	g := mustGateway(t, up, nil, Deps{Resolver: identity.New(nil), Preparer: prep, Capturer: make(chanCapturer, 16), Cache: counts})
	send := func(user, conv, question string) int {
		t.Helper()
		body := `{"model":"gpt-4o","messages":[{"role":"user","content":"` + question + `"}]}`
		resp, b := g.post(t, "/v1/chat/completions", body, map[string]string{"X-Memory-User": user, "X-Memory-Conversation": conv})
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		n, err := strconv.Atoi(resp.Header.Get("X-Memory-Prefix-Tokens"))
		if err != nil {
			t.Fatalf("X-Memory-Prefix-Tokens %q", resp.Header.Get("X-Memory-Prefix-Tokens"))
		}
		return n
	}
	if n := send("alice", "c1", "first question"); n != 0 {
		t.Errorf("first request repeats %d tokens", n)
	}
	second := send("alice", "c1", "second question")
	// The body up to the question repeats: ~9 KB of ~9.1 KB, to within a
	// chunk.
	if second < 1800 || second > 2000 {
		t.Errorf("second request repeats %d of 2000 tokens", second)
	}
	if n := send("bob", "c1", "second question"); n != 0 {
		t.Errorf("another user's request repeats %d tokens", n)
	}
	if n := send("alice", "c2", "second question"); n != 0 {
		t.Errorf("another conversation's request repeats %d tokens", n)
	}
	g.waitMetric(t, "memgate_prompt_prefix_repeated_tokens_total "+strconv.Itoa(second))
	repeated, _ := counts.get()
	if repeated[memory.DefaultTenant] != second {
		t.Errorf("counted %v, want %d", repeated, second)
	}
	// The provider's cached tokens, from the captured usage.
	g.waitMetric(t, "memgate_provider_cached_tokens_total "+strconv.Itoa(4*1536))
	if _, cached := counts.get(); cached[memory.DefaultTenant] != 4*1536 {
		t.Errorf("cached %v, want %d", cached, 4*1536)
	}
}

// TestPrefixesBounded: the table forgets the least recently used
// conversations beyond prefixEntries, and a conversation's hashes stop at
// prefixMaxChunks.
func TestPrefixesBounded(t *testing.T) {
	p := newPrefixes()
	body := []byte(strings.Repeat("x", 3*prefixChunk+10))
	first := newPrefixKey("t", "u", "first", "chat", "m")
	p.repeat(first, body)
	for i := range prefixEntries {
		p.repeat(newPrefixKey("t", "u", strconv.Itoa(i), "chat", "m"), body)
	}
	if p.lru.Len() != prefixEntries {
		t.Fatalf("%d entries, want %d", p.lru.Len(), prefixEntries)
	}
	if n := p.repeat(first, body); n != 0 {
		t.Errorf("an evicted conversation repeats %d bytes", n)
	}
	if n := p.repeat(first, body); n != 3*prefixChunk {
		t.Errorf("repeat = %d, want %d", n, 3*prefixChunk)
	}
	huge := []byte(strings.Repeat("y", (prefixMaxChunks+5)*prefixChunk))
	if hs := p.chain(huge); len(hs) != prefixMaxChunks {
		t.Errorf("%d hashes, want %d", len(hs), prefixMaxChunks)
	}
	// A body that differs at its first byte repeats nothing.
	other := append([]byte("z"), body[1:]...)
	if n := p.repeat(first, other); n != 0 {
		t.Errorf("a different first byte repeats %d bytes", n)
	}
}

// TestCacheBreakpointsHeader: X-Memory-Cache-Breakpoints: on adds
// cache_control after the stable memory of a /v1/messages prompt and at the
// end of its recent turns (the app's own breakpoint kept); off, or absent
// with the option off, adds none. Any other value is a 400 naming the
// header, in Anthropic's shape, and nothing goes upstream: read as absent,
// a misspelt "no" would follow the gateway's option instead.
func TestCacheBreakpointsHeader(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   int // cache_control blocks upstream; the client sends 1; -1: a 400
	}{{"on", 3}, {"off", 1}, {"", 1}, {"False", 1}, {"no", -1}, {"enabled", -1}} {
		t.Run("header "+tc.header, func(t *testing.T) {
			g, fake := dialectGateway(t, rememberingPreparer(nil), nil, nil)
			h := map[string]string{}
			for k, v := range claudeHeaders {
				h[k] = v
			}
			if tc.header != "" {
				h["X-Memory-Cache-Breakpoints"] = tc.header
			}
			resp, b := g.post(t, "/v1/messages", claudeBody, h)
			if tc.want < 0 {
				if resp.StatusCode != 400 || !strings.Contains(string(b), `"type":"invalid_request_error"`) ||
					!strings.Contains(string(b), "X-Memory-Cache-Breakpoints") {
					t.Fatalf("status %d: %s; want a 400 naming X-Memory-Cache-Breakpoints", resp.StatusCode, b)
				}
				if n := len(fake.Requests()); n != 0 {
					t.Errorf("%d requests went upstream", n)
				}
				return
			}
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			sent := string(fake.Requests()[0].Body)
			if got := strings.Count(sent, `"cache_control"`); got != tc.want {
				t.Errorf("%d cache_control upstream, want %d:\n%s", got, tc.want, sent)
			}
		})
	}
}
