package anthropic

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/tokens"
)

// TestClaudeEstimateBound checks the documented error bound of Counter over
// testdata/claude_tokens.json, whose reference counts come from Claude's
// tokenizer (testdata/measure_claude_tokens.mjs, run with ai-tokenizer and
// @anthropic-ai/tokenizer installed): the estimate is never below the
// reference, by at least 8.9%, and at most 2.4 times it.
func TestClaudeEstimateBound(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the tiktoken encodings")
	}
	b, err := os.ReadFile("testdata/claude_tokens.json")
	if err != nil {
		t.Fatal(err)
	}
	var data struct {
		Samples []struct {
			Name   string `json:"name"`
			Claude int    `json:"claude"`
			Text   string `json:"text"`
		} `json:"samples"`
	}
	if err := json.Unmarshal(b, &data); err != nil {
		t.Fatal(err)
	}
	base, err := tokens.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := NewCounter(base, tokens.DefaultContextWindow)
	var ratios []float64
	for _, s := range data.Samples {
		est := c.Text("claude-sonnet-4-5", s.Text)
		r := float64(est) / float64(s.Claude)
		ratios = append(ratios, r)
		if r < 1.089 {
			t.Errorf("%s: estimate %d for %d reference tokens (%.3f): below the documented margin", s.Name, est, s.Claude, r)
		}
		if r > 2.4 {
			t.Errorf("%s: estimate %d for %d reference tokens (%.3f): above the documented bound", s.Name, est, s.Claude, r)
		}
		if newer := c.Text("claude-opus-4-7", s.Text); float64(newer) < 1.3*float64(s.Claude) {
			t.Errorf("%s: newer-tokenizer estimate %d is below 1.3 × %d", s.Name, newer, s.Claude)
		}
	}
	slices.Sort(ratios)
	t.Logf("%d samples: estimate/reference min %.3f median %.3f max %.3f", len(ratios), ratios[0], ratios[len(ratios)/2], ratios[len(ratios)-1])
}

func TestCounterPassesOtherModels(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the tiktoken encodings")
	}
	base, err := tokens.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := NewCounter(base, tokens.DefaultContextWindow)
	msg := json.RawMessage(`{"role":"user","content":"Olá, mudei-me para o Porto."}`)
	if c.Text("gpt-4o", "hello") != base.Text("gpt-4o", "hello") || c.RawMessage("gpt-4o", msg) != base.RawMessage("gpt-4o", msg) ||
		c.Messages("gpt-4o", []json.RawMessage{msg}) != base.Messages("gpt-4o", []json.RawMessage{msg}) || c.ContextWindow("gpt-4o") != 128000 {
		t.Error("a non-Claude model is not counted by the wrapped counter")
	}
	if c.RawMessage("claude-sonnet-4-5", msg) <= base.RawMessage("claude-sonnet-4-5", msg) {
		t.Error("a Claude message is not counted high")
	}
	if got := c.Messages("claude-sonnet-4-5", []json.RawMessage{msg}); got != c.RawMessage("claude-sonnet-4-5", msg)+4 {
		t.Errorf("Messages = %d, want RawMessage + ceil(1.3×3)", got)
	}
	if c.ContextWindow("claude-sonnet-4-5") != ContextWindow || c.ContextWindow("anthropic/claude-opus-4-7") != ContextWindow {
		t.Error("Claude context window")
	}
}

func TestNewTokenizer(t *testing.T) {
	for model, want := range map[string]bool{
		"claude-3-5-sonnet-20241022": false, "claude-3-haiku-20240307": false, "claude-sonnet-4-5": false, "claude-sonnet-4-20250514": false,
		"claude-haiku-4-5": false, "claude-opus-4-20250514": false, "claude-opus-4-1": false, "claude-opus-4-6": false, "claude-opus-4": false,
		"claude-opus-4-7": true, "claude-opus-4-8": true, "claude-sonnet-5": true, "claude-fable-5": true, "anthropic/claude-opus-4-7": true,
	} {
		if got := newTokenizer(model); got != want {
			t.Errorf("newTokenizer(%q) = %v, want %v", model, got, want)
		}
	}
}

// TestSystemMessageIsRawMessage: counting a system message from its text
// gives what counting its JSON gives, for Claude and other models.
func TestSystemMessageIsRawMessage(t *testing.T) {
	tok, err := tokens.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"", "hi", "<memory>\nPinned:\n- vegan\n</memory>", "Ünïcödé — 日本語 \"quoted\"\t\\ back",
		strings.Repeat("Caroline said she painted a sunrise over the lake.\n", 300)}
	c := NewCounter(tok, tokens.DefaultContextWindow)
	for _, model := range []string{"claude-sonnet-4-5", "gpt-4o-mini"} {
		for _, text := range texts {
			raw, err := json.Marshal(map[string]string{"role": "system", "content": text})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := c.SystemMessage(model, text), c.RawMessage(model, raw); got != want {
				t.Errorf("%s: SystemMessage(%.20q) = %d, RawMessage = %d", model, text, got, want)
			}
		}
	}
}
