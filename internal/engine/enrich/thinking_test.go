package enrich

import (
	"context"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// thoughtMessages is a chat whose reply opens with a reasoning model's
// <think> block, as an OpenAI-compatible server relays it.
func thoughtMessages() []memory.Message {
	return []memory.Message{
		{Role: "user", Content: "I want to save R$ 5.000 by June. How much a month?"},
		{Role: "assistant", Content: "<think>The user has 2026-09-01 as a deadline maybe; I will budget R$ 9.999 for Lyon.</think>\n\nThat is about R$ 830 a month until June."},
	}
}

// TestSummariesLeaveOutTheReplysReasoning: neither summariser reads the
// reasoning block a reply opened with: the extractive summary holds none
// of it, and the model summariser's prompt neither.
func TestSummariesLeaveOutTheReplysReasoning(t *testing.T) {
	out, err := NewExtractive(words).Summarize(context.Background(), Input{Messages: thoughtMessages(), MaxTokens: 200})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.Summary, "Lyon") || strings.Contains(out.Summary, "think>") || !strings.Contains(out.Summary, "R$ 830") {
		t.Errorf("extractive summary %q, want the answer without the reasoning", out.Summary)
	}
	c := &scriptedChatter{replies: []string{goodReply}}
	if _, err := NewLLM(c, "gpt-4o-mini", words).Summarize(context.Background(), Input{Messages: thoughtMessages(), MaxTokens: 100}); err != nil {
		t.Fatal(err)
	}
	prompt := c.reqs[0].Messages[1].Content
	if strings.Contains(prompt, "Lyon") || strings.Contains(prompt, "think>") || !strings.Contains(prompt, "assistant: That is about R$ 830") {
		t.Errorf("summariser prompt, want the answer without the reasoning:\n%s", prompt)
	}
}
