package main

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestInWindowEditRestatesFacts: a full-history chat in a named
// conversation (X-Memory-Conversation) says "I live in Lisbon." as its
// last turn, and the user edits that message to
// "I live in Porto." and resends the history, the old turn and its reply
// left out. Through the gateway, on both stores, the save supersedes the
// old branch and the facts it alone stated (the city pinned by pattern,
// the home_city the extraction model found) go with it, even from the
// facts' history: the user's facts say Porto, never Lisbon.
func TestInWindowEditRestatesFacts(t *testing.T) {
	const keep = 100 // every message is in the window
	up := upstreamtest.New(t, extractingUpstream())
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			g, user, _ := startLongChat(t, mk, keep, "branchfacts-", name)
			const conv = "trip"
			// send sends history in conv and returns it with the reply.
			send := namedChatSender(t, g, user, conv)
			values := func(key string) []string {
				fs, err := g.mem.store.Facts(context.Background(), memory.DefaultTenant, user, time.Now(), true)
				if err != nil {
					t.Fatal(err)
				}
				var out []string
				for _, f := range fs {
					if f.Key == key {
						v := f.Value
						if f.SupersededAt != nil {
							v += " (superseded)"
						}
						out = append(out, v)
					}
				}
				slices.Sort(out)
				return out
			}
			settled := func(what string, want []string) {
				t.Helper()
				deadline := time.Now().Add(60 * time.Second)
				for {
					city, home := values("city"), values("home_city")
					if slices.Equal(city, want) && slices.Equal(home, want) {
						return
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s: the user's city facts are %q, home_city %q; want %q for both", what, city, home, want)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}

			user1 := map[string]any{"role": "user", "content": "hello"}
			history := send(user1)
			history = send(append(history, map[string]any{"role": "user", "content": "I live in Lisbon."})...)
			id := memory.Identity{Tenant: memory.DefaultTenant, User: user, Conversation: conv}
			waitStored(t, g, id, len(history))
			settled("after the statement", []string{"Lisbon"})
			// The edit: the old turn and its reply leave the history, the
			// new text is sent in its place.
			send(append(history[:2:2], map[string]any{"role": "user", "content": "I live in Porto."})...)
			settled("after the edit", []string{"Porto"})
			if live, superseded := liveAndSuperseded(t, g, id); superseded != 2 || !slices.Contains(live, "user: I live in Porto.") || slices.Contains(live, "user: I live in Lisbon.") {
				t.Fatalf("after the edit %d messages are superseded (want the old turn and its reply); live: %q", superseded, live)
			}
		})
	}
}
