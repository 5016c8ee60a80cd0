package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// livesIn is what the fake extraction model reads as a statement of where
// the user lives.
var livesIn = regexp.MustCompile(`I live in (\w+)\.`)

// extractingUpstream answers fact extraction requests (memgate's side
// model call, recognised by its instructions) with the cities the user
// messages say the user lives in, as facts of key home_city, and every
// other chat completion as echoUpstream does.
func extractingUpstream() http.Handler {
	echo := echoUpstream()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !bytes.Contains(body, []byte("You extract durable facts")) {
			echo.ServeHTTP(w, r)
			return
		}
		var req struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		json.Unmarshal(body, &req)
		facts := []map[string]any{}
		if n := len(req.Messages); n > 0 {
			for _, m := range livesIn.FindAllStringSubmatch(req.Messages[n-1].Content, -1) {
				facts = append(facts, map[string]any{"type": "profile", "key": "home_city", "value": m[1], "confidence": 0.9})
			}
		}
		answer, _ := json.Marshal(map[string]any{"facts": facts})
		upstreamtest.Chat(upstreamtest.Reply{Content: string(answer)}).ServeHTTP(w, r)
	})
}

// TestLongChatEditRestatesFacts: a headerless full-history chat says "I
// live in Lisbon." as a turn, grows past what one request stores, and the
// user then edits that message, which its requests now leave out, to "I
// live in Porto.". Through the gateway, on both stores, the user's facts
// follow the edit: the facts the old text alone stated (the city pinned
// by pattern, the home_city the extraction model found) are gone, even
// from the facts' history, and the new text, enriched once through the
// enrichment queue as a new turn is, states Porto for both.
func TestLongChatEditRestatesFacts(t *testing.T) {
	const keep = 20
	up := upstreamtest.New(t, extractingUpstream())
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			g, user, chat := startLongChat(t, mk, keep, "editfacts-", name)
			// values returns the user's facts of key as "value" (current)
			// or "value (superseded)", history included.
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

			chat.grow(memory.BranchHead + keep - 6)
			const edited = memory.BranchHead + keep - 6 // the position of the statement
			conv := chat.say("I live in Lisbon.")       // stored whole
			id := memory.Identity{Tenant: memory.DefaultTenant, User: user, Conversation: conv}
			waitStored(t, g, id, len(chat.history)-1)
			settled("after the statement", []string{"Lisbon"})
			chat.grow(len(chat.history) - 1 + 40)
			if c := chat.say("q2"); c != conv { // cut: the statement is left out
				t.Fatalf("the second turn went to %q, want %q", c, conv)
			}
			if got := chat.history[1+edited]["content"]; got != "I live in Lisbon." {
				t.Fatalf("message %d is %q, want the statement", edited, got)
			}
			chat.history[1+edited]["content"] = "I live in Porto."
			if c := chat.say("q3"); c != conv {
				t.Fatalf("the edited chat went to %q, want %q", c, conv)
			}
			settled("after the edit", []string{"Porto"})
			if live, superseded := liveAndSuperseded(t, g, id); superseded != 1 || !slices.Contains(live, "user: I live in Porto.") {
				t.Fatalf("after the edit %d messages are superseded (want the edited one), the new text live: %v", superseded, slices.Contains(live, "user: I live in Porto."))
			}
			// The next turn changes nothing: the new text is enriched once.
			if c := chat.say("q4"); c != conv {
				t.Fatalf("the next turn went to %q, want %q", c, conv)
			}
			eventually(t, "the next turn to be stored", func() bool {
				live, _ := liveAndSuperseded(t, g, id)
				return slices.Contains(live, "assistant: ack: q4")
			})
			settled("after the next turn", []string{"Porto"})
		})
	}
}
