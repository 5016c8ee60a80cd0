package main

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

func headers(tenant, user, conv string, extra ...string) map[string]string {
	h := map[string]string{"X-Memory-User": user, "X-Memory-Conversation": conv}
	if tenant != "" {
		h["X-Memory-Tenant"] = tenant
	}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = extra[i+1]
	}
	return h
}

// TestRecallAcrossConversations: a fact stated in conversation A reaches
// the upstream prompt of conversation B of the same user when the question
// relates to it — never for another user, another tenant with the same user
// id, or with X-Memory-Cross: off. On both stores.
func TestRecallAcrossConversations(t *testing.T) {
	up := upstreamtest.New(t, recallUpstream())
	const stated = "I am vegetarian and I live in Lisbon, near the old town."
	const question = "Can you recommend a vegetarian dinner place in Lisbon tonight?"
	for name, mk := range recallConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			g := startRecallGateway(t, mk(t))
			if r := chat(t, g.URL, headers("", "u1", "conv-a"), false, user(stated)); r.Status != http.StatusOK {
				t.Fatalf("chat: %d %s", r.Status, r.Body)
			}
			eventually(t, "the statement to be indexed", func() bool {
				items, err := g.recall.Manager.Search(context.Background(), memory.DefaultTenant, "u1", "vegetarian Lisbon", 5)
				return err == nil && len(items) > 0
			})
			tests := []struct {
				name    string
				headers map[string]string
				want    bool
			}{
				{"same user, other conversation", headers("", "u1", "conv-b"), true},
				{"other user", headers("", "u2", "conv-b"), false},
				{"other tenant, same user id", headers("tenant-2", "u1", "conv-b"), false},
				{"cross-conversation off", headers("", "u1", "conv-c", "X-Memory-Cross", "off"), false},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					if r := chat(t, g.URL, tt.headers, false, user(question)); r.Status != http.StatusOK {
						t.Fatalf("chat: %d %s", r.Status, r.Body)
					}
					prompt := lastChatPrompt(t, up)
					if got := strings.Contains(prompt, stated); got != tt.want {
						t.Fatalf("statement in prompt = %v, want %v; prompt:\n%s", got, tt.want, prompt)
					}
				})
			}
		})
	}
}

// TestRecallSupersessionEndToEnd: "I live in Lisbon" then "I moved to
// Porto" → the prompt of a new conversation carries Porto as the current
// fact, never Lisbon; the management API keeps Lisbon in history.
func TestRecallSupersessionEndToEnd(t *testing.T) {
	up := upstreamtest.New(t, recallUpstream())
	for name, mk := range recallConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			g := startRecallGateway(t, mk(t))
			facts := func(history bool) []memory.Fact {
				var out struct{ Data []memory.Fact }
				url := g.URL + "/v1/memory/users/u1/facts"
				if history {
					url += "?history=true"
				}
				if code := apiCall(t, http.MethodGet, url, nil, nil, &out); code != http.StatusOK {
					t.Fatalf("GET facts: %d", code)
				}
				return out.Data
			}
			chat(t, g.URL, headers("", "u1", "march"), false, user("I live in Lisbon."))
			eventually(t, "the Lisbon fact", func() bool { f := facts(false); return len(f) == 1 && f[0].Value == "lives in Lisbon" })
			chat(t, g.URL, headers("", "u1", "may"), false, user("I moved to Porto last month."))
			eventually(t, "the Porto fact", func() bool { f := facts(false); return len(f) == 1 && f[0].Value == "lives in Porto" })

			chat(t, g.URL, headers("", "u1", "june"), false, user("Any plans you would suggest for my weekend at home?"))
			prompt := lastChatPrompt(t, up)
			if !strings.Contains(prompt, "lives in Porto") || strings.Contains(prompt, "lives in Lisbon") {
				t.Fatalf("prompt must carry Porto as current and not Lisbon:\n%s", prompt)
			}
			hist := facts(true)
			var lisbon *memory.Fact
			for i := range hist {
				if hist[i].Value == "lives in Lisbon" {
					lisbon = &hist[i]
				}
			}
			if len(hist) != 2 || lisbon == nil || lisbon.SupersededAt == nil {
				t.Fatalf("history = %+v, want Lisbon kept as superseded", hist)
			}
		})
	}
}

// TestRecallManagementAPI: facts are added, pinned, listed, deleted and
// searched per tenant; bad input is an OpenAI-shaped 400; deleting a user
// removes their items and facts from search at once.
func TestRecallManagementAPI(t *testing.T) {
	up := upstreamtest.New(t, recallUpstream())
	for name, mk := range recallConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			g := startRecallGateway(t, mk(t))
			base := g.URL + "/v1/memory/users/u1/facts"
			var added memory.Fact
			if code := apiCall(t, http.MethodPost, base, nil, map[string]any{"type": "limit", "key": "Rent Budget", "value": "rent under 1.200 euros", "pinned": true}, &added); code != http.StatusOK || added.ID == 0 || !added.Pinned || added.Key != "rent_budget" {
				t.Fatalf("POST fact = %d %+v", code, added)
			}
			bad := []map[string]any{
				{"type": "secret", "key": "k", "value": "v"},
				{"type": "goal", "key": "", "value": "v"},
				{"type": "goal", "key": "k", "value": strings.Repeat("v", 301)},
				{"type": "goal", "key": "k", "value": "v", "confidence": 2},
				{"type": "goal", "key": "k", "value": "v", "expires_at": "2001-01-01T00:00:00Z"},
				{"type": "goal", "key": "k", "value": "v", "surprise": true},
			}
			for _, body := range bad {
				var e struct {
					Error struct{ Type, Message string }
				}
				if code := apiCall(t, http.MethodPost, base, nil, body, &e); code != http.StatusBadRequest || e.Error.Type != "invalid_request_error" {
					t.Fatalf("POST %v = %d %+v, want a 400 invalid_request_error", body, code, e)
				}
			}
			var list struct{ Data []memory.Fact }
			apiCall(t, http.MethodGet, base, nil, nil, &list)
			if len(list.Data) != 1 {
				t.Fatalf("facts = %+v, want the one valid fact", list.Data)
			}
			// Another tenant sees none of it and cannot delete it.
			other := map[string]string{"X-Memory-Tenant": "tenant-2"}
			apiCall(t, http.MethodGet, base, other, nil, &list)
			if len(list.Data) != 0 {
				t.Fatalf("tenant-2 sees %d facts", len(list.Data))
			}
			del := base + "/" + itoa(added.ID)
			if code := apiCall(t, http.MethodDelete, del, other, nil, nil); code != http.StatusNotFound {
				t.Fatalf("DELETE from another tenant = %d, want 404", code)
			}

			chat(t, g.URL, headers("", "u1", "c1"), false, user("My sister Ana is getting married in Sintra in September."))
			search := func(h map[string]string) []memory.Item {
				var out struct{ Data []memory.Item }
				if code := apiCall(t, http.MethodPost, g.URL+"/v1/memory/search", h, map[string]any{"user": "u1", "query": "sister wedding Sintra", "top_k": 3}, &out); code != http.StatusOK {
					t.Fatalf("search = %d", code)
				}
				return out.Data
			}
			eventually(t, "the message to be searchable", func() bool { return len(search(nil)) > 0 })
			items := search(nil)
			if !strings.Contains(items[0].Text, "Sintra") || items[0].Score <= 0 || items[0].Conversation != "c1" || len(items) > 3 {
				t.Fatalf("search = %+v", items)
			}
			if got := search(other); len(got) != 0 {
				t.Fatalf("tenant-2 search found %d items", len(got))
			}
			if code := apiCall(t, http.MethodDelete, del, nil, nil, nil); code != http.StatusOK {
				t.Fatalf("DELETE fact = %d", code)
			}
			if code := apiCall(t, http.MethodDelete, del, nil, nil, nil); code != http.StatusNotFound {
				t.Fatalf("second DELETE = %d, want 404", code)
			}

			if code := apiCall(t, http.MethodDelete, g.URL+"/v1/memory/users/u1", nil, nil, nil); code != http.StatusOK {
				t.Fatalf("DELETE user = %d", code)
			}
			if got := search(nil); len(got) != 0 {
				t.Fatalf("after deleting the user, search found %+v", got)
			}
			apiCall(t, http.MethodGet, base+"?history=true", nil, nil, &list)
			if len(list.Data) != 0 {
				t.Fatalf("after deleting the user, facts = %+v", list.Data)
			}
		})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
