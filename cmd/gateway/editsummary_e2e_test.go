package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// editPhone is the number phoneChat's second message states.
const editPhone = "555-0100"

// editFiller makes a question long enough that the history overflows
// phoneChat's budget.
var editFiller = strings.Repeat(" Please answer at length, with examples, history and tips.", 6)

// phoneChat is a full-history chat through a gateway whose second message
// states editPhone, grown until the summary that stands in for its oldest
// messages carries the number.
type phoneChat struct {
	t       *testing.T
	g       *testGateway
	up      *summariserUpstream
	hdr     map[string]string
	id      memory.Identity
	history []map[string]any
}

// startPhoneChat starts a gateway of mk's configuration (compacting
// often, with a budget the history overflows, recall on only with recall,
// and then without extraction) and grows the chat until its summary
// carries editPhone.
func startPhoneChat(t *testing.T, up *summariserUpstream, mk func(*testing.T) config.Config, user string, recall bool) *phoneChat {
	t.Helper()
	cfg := mk(t)
	cfg.Compaction.MaxMessages, cfg.Compaction.KeepMessages = 4, 2
	cfg.Recall.Enabled, cfg.Recall.Extraction.Enabled = recall, false
	cfg.Memory.MaxContextTokens = 400 // the history overflows: the summary stands in for its oldest turns
	c := &phoneChat{t: t, g: startGateway(t, cfg), up: up,
		hdr: map[string]string{"X-Memory-User": user, "X-Memory-Conversation": "c"},
		id:  memory.Identity{Tenant: memory.DefaultTenant, User: user, Conversation: "c"}}
	c.say("Hello!")
	c.say("My phone number is " + editPhone + " and I like green tea.")
	for _, q := range []string{"Tell me about tea.", "And coffee?", "What about cocoa?", "And water?"} {
		c.say(q + editFiller)
	}
	eventually(t, "a summary carrying the phone number", func() bool {
		s, ok := c.summary()
		return ok && strings.Contains(s.Text, editPhone)
	})
	return c
}

// say sends the history with text as its newest user message, waits for
// the turn to be stored and returns the text of the prompt sent upstream.
func (c *phoneChat) say(text string) string {
	c.t.Helper()
	c.history = append(c.history, map[string]any{"role": "user", "content": text})
	if r := chat(c.t, c.g.URL, c.hdr, false, c.history...); r.Status != 200 {
		c.t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	prompts := c.up.chatPrompts()
	c.history = append(c.history, map[string]any{"role": "assistant", "content": "ack: " + text})
	waitStored(c.t, c.g, c.id, len(c.history))
	return promptText(c.t, prompts[len(prompts)-1])
}

// editPhoneOut edits the message stating the number (and its answer) as
// the user would to remove it.
func (c *phoneChat) editPhoneOut() {
	c.history[2]["content"], c.history[3]["content"] = "I like green tea.", "ack: I like green tea."
}

// summary returns the conversation's newest summary, if any.
func (c *phoneChat) summary() (memory.Summary, bool) {
	c.t.Helper()
	s, err := c.g.mem.store.LatestSummary(context.Background(), c.id)
	if errors.Is(err, memory.ErrNotFound) {
		return s, false
	}
	if err != nil {
		c.t.Fatal(err)
	}
	return s, true
}

// eachPhoneChat runs test on a phoneChat of each store, its user named
// from prefix, recall off.
func eachPhoneChat(t *testing.T, prefix string, test func(t *testing.T, c *phoneChat)) {
	eachPhoneChatOf(t, prefix, false, test)
}

// eachPhoneChatOf is eachPhoneChat, with recall on when recall.
func eachPhoneChatOf(t *testing.T, prefix string, recall bool, test func(t *testing.T, c *phoneChat)) {
	up := &summariserUpstream{}
	srv := upstreamtest.New(t, up)
	for name, mk := range storeConfigs(t, srv) {
		t.Run(name, func(t *testing.T) {
			test(t, startPhoneChat(t, up, mk, prefix+"-"+strings.ReplaceAll(name, "+", "-"), recall))
		})
	}
}

// sayWithSummary is say, failing unless the prompt carries the summary
// with the number.
func (c *phoneChat) sayWithSummary(text string) {
	c.t.Helper()
	if p := c.say(text + editFiller); !strings.Contains(p, "MODEL SUMMARY") || !strings.Contains(p, editPhone) {
		c.t.Fatalf("%q, without an edit, is not shown the summary with the number:\n%s", text, p)
	}
}

// TestEditDropsTheSummaryOfTheOldText: a full-history chat states a phone
// number in its second message, and grows until the summary that stands in
// for its oldest messages carries the number. The user then edits that
// message to remove it. Through the gateway, on both stores, the summary
// covering the old text goes with it: the next prompt sent upstream no
// longer carries the number, and the summary compaction writes next is
// the edited text's.
func TestEditDropsTheSummaryOfTheOldText(t *testing.T) {
	eachPhoneChat(t, "sumedit", func(t *testing.T, c *phoneChat) {
		c.sayWithSummary("And juice?")

		// The user edits the message and resends the history.
		c.editPhoneOut()
		c.say("And milk?" + editFiller)
		if s, ok := c.summary(); ok && strings.Contains(s.Text, editPhone) {
			t.Fatalf("after the edit the summary still says %q", s.Text)
		}
		if p := c.say("And lemonade?" + editFiller); strings.Contains(p, editPhone) {
			t.Fatalf("after the edit the prompt still carries the number:\n%s", p)
		}
		eventually(t, "a summary of the edited chat", func() bool {
			s, ok := c.summary()
			return ok && !strings.Contains(s.Text, editPhone)
		})
	})
}

// TestEditLeavesTheOldSummaryOutOfItsOwnPrompt: the request that carries
// the edit of a message the summary covers is assembled before its save
// drops that summary and retracts the pin only the old text stated;
// through the gateway, on both stores, its own prompt is sent without the
// summary and without the number anywhere (summary, pinned facts, facts,
// recall: the client's edited history tells), while the requests before
// it, resending the history unchanged, carry both.
func TestEditLeavesTheOldSummaryOutOfItsOwnPrompt(t *testing.T) {
	eachPhoneChat(t, "editsum", func(t *testing.T, c *phoneChat) {
		c.sayWithSummary("And juice?")
		if p := c.say("And soda?" + editFiller); !strings.Contains(pinnedBlock(p), editPhone) {
			t.Fatalf("without an edit, the prompt does not pin the number:\n%s", p)
		}

		c.editPhoneOut()
		p := c.say("And milk?" + editFiller)
		if strings.Contains(p, "MODEL SUMMARY") {
			t.Fatalf("the request carrying the edit is shown the summary of the old text:\n%s", p)
		}
		if strings.Contains(p, editPhone) {
			t.Fatalf("the request carrying the edit is shown the old number:\n%s", p)
		}
	})
}

// pinnedBlock returns the pinned facts' part of a prompt's text: from its
// "Pinned —" header to the next blank line ("" without one).
func pinnedBlock(p string) string {
	i := strings.Index(p, "Pinned —")
	if i < 0 {
		return ""
	}
	p = p[i:]
	if j := strings.Index(p, "\n\n"); j >= 0 {
		p = p[:j]
	}
	return p
}

// TestEditLeavesTheOldTextOutOfItsOwnRecall is
// TestEditLeavesTheOldSummaryOutOfItsOwnPrompt with recall on: a question
// about the number, asked where the prompt's window no longer shows the
// message stating it, recalls the old text; the request carrying the
// edit, which asks again, is shown the number nowhere (no summary, pin,
// recalled passage, or kept block of an earlier turn).
func TestEditLeavesTheOldTextOutOfItsOwnRecall(t *testing.T) {
	eachPhoneChatOf(t, "editrec", true, func(t *testing.T, c *phoneChat) {
		if p := c.say("What is my phone number?"); !strings.Contains(p, editPhone) {
			t.Fatalf("without an edit, the number is not shown:\n%s", p)
		}
		c.editPhoneOut()
		if p := c.say("What is my phone number, again?"); strings.Contains(p, editPhone) {
			t.Fatalf("the request carrying the edit is shown the old number:\n%s", p)
		}
	})
}
