package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestEditDropsTheSummaryOfTheOldText: a full-history chat states a phone
// number in its second message, and grows until the summary that stands in
// for its oldest messages carries the number. The user then edits that
// message to remove it. Through the gateway, on both stores, the summary
// covering the old text goes with it: the next prompt sent upstream no
// longer carries the number, and the summary compaction writes next is
// the edited text's.
func TestEditDropsTheSummaryOfTheOldText(t *testing.T) {
	const phone = "555-0100"
	up := &summariserUpstream{}
	srv := upstreamtest.New(t, up)
	for name, mk := range storeConfigs(t, srv) {
		t.Run(name, func(t *testing.T) {
			cfg := mk(t)
			cfg.Compaction.MaxMessages, cfg.Compaction.KeepMessages = 4, 2
			cfg.Recall.Enabled, cfg.Recall.Extraction.Enabled = false, false
			cfg.Memory.MaxContextTokens = 400 // the history overflows: the summary stands in for its oldest turns
			g := startGateway(t, cfg)
			user := "sumedit-" + strings.ReplaceAll(name, "+", "-")
			hdr := map[string]string{"X-Memory-User": user, "X-Memory-Conversation": "c"}
			id := memory.Identity{Tenant: memory.DefaultTenant, User: user, Conversation: "c"}
			var history []map[string]any
			say := func(text string) string {
				t.Helper()
				history = append(history, map[string]any{"role": "user", "content": text})
				if r := chat(t, g.URL, hdr, false, history...); r.Status != 200 {
					t.Fatalf("status %d: %s", r.Status, r.Body)
				}
				prompts := up.chatPrompts()
				history = append(history, map[string]any{"role": "assistant", "content": "ack: " + text})
				waitStored(t, g, id, len(history))
				return promptText(t, prompts[len(prompts)-1])
			}
			say("Hello!")
			say("My phone number is " + phone + " and I like green tea.")
			filler := strings.Repeat(" Please answer at length, with examples, history and tips.", 6)
			for _, q := range []string{"Tell me about tea.", "And coffee?", "What about cocoa?", "And water?"} {
				say(q + filler)
			}
			summary := func() (memory.Summary, bool) {
				s, err := g.mem.store.LatestSummary(context.Background(), id)
				if errors.Is(err, memory.ErrNotFound) {
					return s, false
				}
				if err != nil {
					t.Fatal(err)
				}
				return s, true
			}
			eventually(t, "a summary carrying the phone number", func() bool {
				s, ok := summary()
				return ok && strings.Contains(s.Text, phone)
			})
			if p := say("And juice?" + filler); !strings.Contains(p, "MODEL SUMMARY") || !strings.Contains(p, phone) {
				t.Fatalf("before the edit the prompt does not carry the summary with the number:\n%s", p)
			}

			// The user edits the message and resends the history.
			history[2]["content"], history[3]["content"] = "I like green tea.", "ack: I like green tea."
			// The request that carries the edit is assembled before its
			// save supersedes anything: the prompts after it are checked.
			say("And milk?" + filler)
			if s, ok := summary(); ok && strings.Contains(s.Text, phone) {
				t.Fatalf("after the edit the summary still says %q", s.Text)
			}
			if p := say("And lemonade?" + filler); strings.Contains(p, phone) {
				t.Fatalf("after the edit the prompt still carries the number:\n%s", p)
			}
			eventually(t, "a summary of the edited chat", func() bool {
				s, ok := summary()
				return ok && !strings.Contains(s.Text, phone)
			})
		})
	}
}
