package inject

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// tallyCounter is byteCounter that records how often it counted.
type tallyCounter struct {
	byteCounter
	raw, text int
}

func (c *tallyCounter) RawMessage(model string, raw json.RawMessage) int {
	c.raw++
	return c.byteCounter.RawMessage(model, raw) + len(model)
}

func (c *tallyCounter) Text(model, s string) int {
	c.text++
	return c.byteCounter.Text(model, s) + 2*len(model)
}

func TestCountCache(t *testing.T) {
	long := strings.Repeat("a stored turn that comes back on every request ", 3)
	raw := json.RawMessage(fmt.Sprintf(`{"role":"user","content":%q}`, long))
	tests := []struct {
		name      string
		calls     func(c *countCache) []int
		want      []int
		raw, text int // calls that reached the wrapped counter
	}{
		{"a long message is counted once", func(c *countCache) []int {
			return []int{c.RawMessage("m", raw), c.RawMessage("m", raw)}
		}, []int{3 + len(raw) + 1, 3 + len(raw) + 1}, 1, 0},
		{"a long text is counted once", func(c *countCache) []int {
			return []int{c.Text("m", long), c.Text("m", long)}
		}, []int{len(long) + 2, len(long) + 2}, 0, 1},
		{"models are counted apart", func(c *countCache) []int {
			return []int{c.Text("m", long), c.Text("mm", long), c.Text("m", long)}
		}, []int{len(long) + 2, len(long) + 4, len(long) + 2}, 0, 2},
		{"a message and its text as plain text are counted apart", func(c *countCache) []int {
			return []int{c.RawMessage("m", raw), c.Text("m", string(raw))}
		}, []int{3 + len(raw) + 1, len(raw) + 2}, 1, 1},
		{"short texts are not remembered", func(c *countCache) []int {
			return []int{c.Text("m", "hi"), c.Text("m", "hi"), c.RawMessage("m", json.RawMessage(`{}`)), c.RawMessage("m", json.RawMessage(`{}`))}
		}, []int{4, 4, 6, 6}, 2, 2},
		{"different texts of one length are counted apart", func(c *countCache) []int {
			other := strings.Repeat("b", len(long))
			return []int{c.Text("m", long), c.Text("m", other), c.Text("m", other)}
		}, []int{len(long) + 2, len(long) + 2, len(long) + 2}, 0, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := &tallyCounter{}
			c := newCountCache(base)
			got := tc.calls(c)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("counts %v, want %v", got, tc.want)
			}
			if base.raw != tc.raw || base.text != tc.text {
				t.Errorf("wrapped counter called %d (RawMessage), %d (Text) times, want %d, %d", base.raw, base.text, tc.raw, tc.text)
			}
		})
	}
}

// TestCountCacheBounded counts far more distinct texts than the cache
// holds: it stays within its bound, and what it answers is still right.
func TestCountCacheBounded(t *testing.T) {
	base := &tallyCounter{}
	c := newCountCache(base)
	limit := 2 * countShards * countGeneration
	pad := strings.Repeat("x", countCacheMinBytes)
	for i := range 3 * limit {
		s := fmt.Sprintf("%s %d", pad, i)
		if got, want := c.Text("m", s), len(s)+2; got != want {
			t.Fatalf("text %d: %d tokens, want %d", i, got, want)
		}
	}
	if n := c.len(); n > limit || n == 0 {
		t.Fatalf("cache holds %d counts, want 1..%d", n, limit)
	}
	// The newest texts are still remembered.
	before := base.text
	s := fmt.Sprintf("%s %d", pad, 3*limit-1)
	if got := c.Text("m", s); got != len(s)+2 {
		t.Fatalf("newest text: %d tokens, want %d", got, len(s)+2)
	}
	if base.text != before {
		t.Error("the newest text was counted again")
	}
}
