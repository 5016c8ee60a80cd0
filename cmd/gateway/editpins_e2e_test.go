package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestEditOfANewMessageLeavesItsPinOutOfItsOwnPrompt: a short
// full-history chat, with no summary, states a phone number in its second
// message, which a rule pins. The requests resending that message
// unchanged are shown the pin; the user then edits the message to say
// something else, and the request carrying the edit — assembled before
// its save retracts the pin only the old text stated — is shown the
// number nowhere (no pin, fact or recalled passage of the old text).
// Through the gateway, on both stores, with recall off and on.
func TestEditOfANewMessageLeavesItsPinOutOfItsOwnPrompt(t *testing.T) {
	up := &summariserUpstream{}
	srv := upstreamtest.New(t, up)
	for name, mk := range storeConfigs(t, srv) {
		for _, recall := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/recall=%v", name, recall), func(t *testing.T) {
				cfg := mk(t)
				cfg.Recall.Enabled, cfg.Recall.Extraction.Enabled = recall, false
				user := fmt.Sprintf("newedit-%s-%v", strings.ReplaceAll(name, "+", "-"), recall)
				c := &phoneChat{t: t, g: startGateway(t, cfg), up: up,
					hdr: map[string]string{"X-Memory-User": user, "X-Memory-Conversation": "c"},
					id:  memory.Identity{Tenant: memory.DefaultTenant, User: user, Conversation: "c"}}
				c.say("Hello!")
				c.say("My phone number is " + editPhone + " and I like green tea.")
				eventually(t, "the pin of the number", func() bool {
					fs, err := c.g.mem.store.Facts(context.Background(), c.id.Tenant, c.id.User, time.Now(), false)
					if err != nil {
						t.Fatal(err)
					}
					return slices.ContainsFunc(fs, func(f memory.Fact) bool { return f.Pinned && strings.Contains(f.Value, editPhone) })
				})
				if p := c.say("Tell me about tea."); !strings.Contains(pinnedBlock(p), editPhone) {
					t.Fatalf("resent unchanged, the history is not shown the pin:\n%s", p)
				}
				if p := c.say("What is my phone number?"); !strings.Contains(pinnedBlock(p), editPhone) {
					t.Fatalf("resent unchanged, the history is not shown the pin:\n%s", p)
				}
				if _, ok := c.summary(); ok {
					t.Fatal("the chat has a summary: the edit is to be of a message none covers")
				}

				c.editPhoneOut()
				if p := c.say("What is my phone number, again?"); strings.Contains(p, editPhone) {
					t.Fatalf("the request carrying the edit is shown the old number:\n%s", p)
				}
			})
		}
	}
}
