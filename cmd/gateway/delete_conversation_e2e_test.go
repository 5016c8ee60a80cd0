package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestDeleteConversationForgetsItsPins reproduces the review's finding 8
// through `gateway serve`: "I decided to move to Lisbon with my partner
// Mariabelle", said in conversation cx, is pinned (and a city fact is
// extracted from it) and reaches the prompt of another conversation; after
// DELETE /v1/memory/conversations/cx neither is listed, in history either,
// and the user's next prompt carries no trace of it, while a pin stated in
// another conversation is still injected. On both stores.
func TestDeleteConversationForgetsItsPins(t *testing.T) {
	const secret = "Mariabelle"
	const decision = "I decided to move to Lisbon with my partner " + secret + "."
	const kept = "I am vegetarian."
	for _, store := range []string{"sqlite", "postgres+redis"} {
		t.Run(store, func(t *testing.T) {
			up := upstreamtest.New(t, recallUpstream())
			base := serveOnStore(t, store, map[string]string{
				"GATEWAY_UPSTREAM_BASE_URL": up.URL(),
				// A key for the side models, so facts are extracted too.
				"GATEWAY_UPSTREAM_API_KEY": "test-upstream-key",
			})
			facts := func(history bool) []memory.Fact {
				t.Helper()
				var out struct{ Data []memory.Fact }
				url := base + "/v1/memory/users/alice/facts"
				if history {
					url += "?history=true"
				}
				if code := apiCall(t, http.MethodGet, url, nil, nil, &out); code != http.StatusOK {
					t.Fatalf("GET facts: %d", code)
				}
				return out.Data
			}
			mentions := func(fs []memory.Fact, s string) bool {
				for _, f := range fs {
					if strings.Contains(f.Value, s) {
						return true
					}
				}
				return false
			}
			say := func(conv, text string) string {
				t.Helper()
				if r := chat(t, base, headers("", "alice", conv), false, user(text)); r.Status != http.StatusOK {
					t.Fatalf("chat in %s: %d %s", conv, r.Status, r.Body)
				}
				return lastChatPrompt(t, up)
			}

			say("cx", decision)
			say("cy", kept)
			eventually(t, "the pins and the extracted city", func() bool {
				fs := facts(false)
				return mentions(fs, secret) && mentions(fs, "vegetarian") && mentions(fs, "lives in Lisbon")
			})
			if p := say("before", "Any tips for packing boxes?"); !strings.Contains(p, secret) {
				t.Fatalf("before the delete, the pin is not injected; prompt:\n%s", p)
			}

			if code := apiCall(t, http.MethodDelete, base+"/v1/memory/conversations/cx?user=alice", nil, nil, nil); code != http.StatusOK {
				t.Fatalf("DELETE conversation: %d", code)
			}
			for _, history := range []bool{false, true} {
				fs := facts(history)
				if mentions(fs, secret) || mentions(fs, "Lisbon") {
					t.Fatalf("facts (history %v) after the delete still hold cx's: %+v", history, fs)
				}
				if !mentions(fs, "vegetarian") {
					t.Fatalf("facts (history %v) after the delete lost cy's pin: %+v", history, fs)
				}
			}
			p := say("after", "Any tips for packing boxes?")
			if strings.Contains(p, secret) || strings.Contains(p, "Lisbon") {
				t.Fatalf("after the delete, the prompt still carries cx's pin:\n%s", p)
			}
			if !strings.Contains(p, "diet: vegetarian") { // cy's pin, as a keyed fact renders
				t.Fatalf("after the delete, cy's pin is no longer injected:\n%s", p)
			}
		})
	}
}
