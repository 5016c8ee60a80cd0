package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestImportedHistoryIsRecalledWithItsDate imports dated history through
// the management API on both stores and asks about it in a new
// conversation: the passage reaches the upstream prompt with the date it
// was said, not the date it was imported. A live turn sent with
// X-Memory-Timestamp is stored with that time; a malformed one is a 400.
func TestImportedHistoryIsRecalledWithItsDate(t *testing.T) {
	up := upstreamtest.New(t, recallUpstream())
	const stated = "We stayed at the Lighthouse Inn right by the old harbour."
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			g := startGateway(t, mk(t))
			body := map[string]any{"user": "u1", "conversation": "trip-2023", "messages": []map[string]any{
				{"role": "user", "content": stated, "timestamp": "2023-05-07T18:30:00Z"},
				{"role": "assistant", "content": "That sounds lovely.", "timestamp": "2023-05-07T18:30:05Z"},
			}}
			var res map[string]any
			if code := apiCall(t, http.MethodPost, g.URL+"/v1/memory/import", nil, body, &res); code != http.StatusOK || res["stored"] != 1.0 {
				t.Fatalf("import: %d %v", code, res)
			}
			eventually(t, "the imported turn to be indexed", func() bool {
				var found struct {
					Data []memory.Item `json:"data"`
				}
				apiCall(t, http.MethodPost, g.URL+"/v1/memory/search", nil, map[string]any{"user": "u1", "query": "Lighthouse Inn harbour"}, &found)
				for _, it := range found.Data {
					if strings.Contains(it.Text, "Lighthouse Inn") {
						if want := time.Date(2023, 5, 7, 18, 30, 0, 0, time.UTC); !it.SaidAt.Equal(want) {
							t.Fatalf("indexed item said at %v, want %v", it.SaidAt, want)
						}
						return true
					}
				}
				return false
			})
			if r := chat(t, g.URL, headers("", "u1", "now"), false, user("Which inn by the old harbour did we stay at?")); r.Status != http.StatusOK {
				t.Fatalf("chat: %d %s", r.Status, r.Body)
			}
			prompt := lastChatPrompt(t, up)
			if !strings.Contains(prompt, "[2023-05-07, conversation trip-2023]\n- ") || !strings.Contains(prompt, "Lighthouse Inn") {
				t.Fatalf("the imported passage is not in the prompt with the date it was said:\n%s", prompt)
			}

			h := headers("", "u1", "live", "X-Memory-Timestamp", "2024-01-02T03:04:05+01:00")
			if r := chat(t, g.URL, h, false, user("Replayed from our old app.")); r.Status != http.StatusOK {
				t.Fatalf("chat with X-Memory-Timestamp: %d %s", r.Status, r.Body)
			}
			id := memory.Identity{Tenant: memory.DefaultTenant, User: "u1", Conversation: "live"}
			eventually(t, "the dated live turn to be stored", func() bool {
				_, msgs, err := g.mem.store.Conversation(context.Background(), id)
				return err == nil && len(msgs) == 2
			})
			_, msgs, _ := g.mem.store.Conversation(context.Background(), id)
			for _, m := range msgs {
				if want := time.Date(2024, 1, 2, 2, 4, 5, 0, time.UTC); !m.CreatedAt.Equal(want) {
					t.Errorf("live %s message stored at %v, want %v", m.Role, m.CreatedAt, want)
				}
			}
			bad := chat(t, g.URL, headers("", "u1", "live", "X-Memory-Timestamp", "last tuesday"), false, user("hi"))
			if bad.Status != http.StatusBadRequest || !strings.Contains(string(bad.Body), "X-Memory-Timestamp") {
				t.Fatalf("malformed X-Memory-Timestamp: %d %s, want a 400 naming the header", bad.Status, bad.Body)
			}
		})
	}
}

// TestImportedHistoryGetsItsVectorsWithoutReindex: an import of 80
// messages (40 exchanges of about 1.2 KB a message, about 95 KB, three
// times a round's budget; few and long, since the backfill's work goes by
// items, so that the race detector's run ends well within its deadline on
// a busy machine) is indexed within its user's
// embedding budget a round of enrichment, its newest messages first; the
// enricher embeds the rest while idle, so every imported message ends
// with a vector without an operator's `gateway reindex`, on both stores.
func TestImportedHistoryGetsItsVectorsWithoutReindex(t *testing.T) {
	up := upstreamtest.New(t, recallUpstream())
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			cfg := backfillConfig(mk(t))
			g := startGateway(t, cfg)
			const n = 40
			said := time.Date(2023, 5, 7, 18, 30, 0, 0, time.UTC)
			pad := strings.Repeat(" The garden gate squeaks in the evening.", 28)
			msgs := make([]map[string]any, 0, 2*n)
			for i := range n {
				at := said.Add(time.Duration(i) * time.Hour)
				msgs = append(msgs,
					map[string]any{"role": "user", "content": fmt.Sprintf("Turn %d: the lantern%d goes by the gate.%s", i, i, pad), "timestamp": at.Format(time.RFC3339)},
					map[string]any{"role": "assistant", "content": fmt.Sprintf("Noted, lantern%d by the gate.%s", i, pad), "timestamp": at.Add(time.Minute).Format(time.RFC3339)})
			}
			var res map[string]any
			body := map[string]any{"user": "imphist", "conversation": "old", "messages": msgs}
			if code := apiCall(t, http.MethodPost, g.URL+"/v1/memory/import", nil, body, &res); code != http.StatusOK || res["stored"] != float64(n) {
				t.Fatalf("import: %d %v", code, res)
			}
			owner := memory.Identity{Tenant: memory.DefaultTenant, User: "imphist", Conversation: "old"}
			waitForBackfill(t, g, owner, "Turn 0: the lantern0 goes by the gate."+pad, func() bool {
				stored, err := g.mem.store.SearchText(context.Background(), memory.ItemQuery{Tenant: owner.Tenant, User: owner.User, Text: fmt.Sprintf("lantern%d", n-1), Limit: 1})
				return err == nil && len(stored) > 0
			})
		})
	}
}

// TestReimportedConversationIsPinnedAgain: a conversation imported,
// deleted (its pins with it) and imported again, byte for byte, gets its
// pins back, though an import's exchange ids derive from its content and
// so repeat; on both stores.
func TestReimportedConversationIsPinnedAgain(t *testing.T) {
	up := upstreamtest.New(t, recallUpstream())
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			g := startGateway(t, mk(t))
			body := map[string]any{"user": "u1", "conversation": "plans", "messages": []map[string]any{
				{"role": "user", "content": "I want to save R$ 5.000 by June for a trip to Japan.", "timestamp": "2023-05-07T18:30:00Z"},
				{"role": "assistant", "content": "A fine goal.", "timestamp": "2023-05-07T18:30:05Z"},
			}}
			pinned := func() bool {
				var out struct{ Data []memory.Fact }
				if code := apiCall(t, http.MethodGet, g.URL+"/v1/memory/users/u1/facts", nil, nil, &out); code != http.StatusOK {
					t.Fatalf("GET facts: %d", code)
				}
				for _, f := range out.Data {
					if f.Pinned && strings.Contains(f.Value, "5.000") {
						return true
					}
				}
				return false
			}
			for round := range 2 {
				var res map[string]any
				if code := apiCall(t, http.MethodPost, g.URL+"/v1/memory/import", nil, body, &res); code != http.StatusOK || res["stored"] != 1.0 {
					t.Fatalf("import %d: %d %v", round, code, res)
				}
				eventually(t, fmt.Sprintf("the savings goal pinned (import %d)", round), pinned)
				if code := apiCall(t, http.MethodDelete, g.URL+"/v1/memory/conversations/plans?user=u1", nil, nil, nil); code != http.StatusOK {
					t.Fatalf("DELETE conversation: %d", code)
				}
				if pinned() {
					t.Fatal("the pin outlived its conversation's deletion")
				}
			}
		})
	}
}
