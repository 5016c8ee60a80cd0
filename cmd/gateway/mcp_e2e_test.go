package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// headerTransport adds fixed headers to every request.
type headerTransport struct {
	h    map[string]string
	next http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header.Set(k, v)
	}
	return t.next.RoundTrip(r)
}

// mcpClient is the official SDK's client.
func mcpClient() *mcp.Client {
	return mcp.NewClient(&mcp.Implementation{Name: "memgate-test", Version: "1"}, nil)
}

// mcpOverHTTP connects the SDK's client to the gateway's /mcp with hdr on
// every request.
func mcpOverHTTP(t *testing.T, base string, hdr map[string]string) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: headerTransport{h: hdr, next: http.DefaultTransport}}}
	cs, err := mcpClient().Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatalf("connect over http: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// mcpInMemory connects the SDK's client to srv over in-memory transports:
// the stdio server, without the pipes.
func mcpInMemory(t *testing.T, srv *mcp.Server) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcpClient().Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

// callTool calls a tool and decodes its JSON answer into out (when not
// nil); it returns the error text of a failed call ("" on success).
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	text := ""
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			text = tc.Text
		}
	}
	if res.IsError {
		return text
	}
	if out != nil {
		if err := json.Unmarshal([]byte(text), out); err != nil {
			t.Fatalf("%s answer %q: %v", name, text, err)
		}
	}
	return ""
}

// mustTool is callTool for a call that must succeed.
func mustTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, out any) {
	t.Helper()
	if msg := callTool(t, cs, name, args, out); msg != "" {
		t.Fatalf("%s(%v) failed: %s", name, args, msg)
	}
}

type factsAnswer struct {
	Facts []memory.Fact `json:"facts"`
}

// apiFacts lists a user's facts through the management API.
func apiFacts(t *testing.T, base, user string, hdr map[string]string) []memory.Fact {
	t.Helper()
	var out struct{ Data []memory.Fact }
	if code := apiCall(t, http.MethodGet, base+"/v1/memory/users/"+user+"/facts", hdr, nil, &out); code != http.StatusOK {
		t.Fatalf("GET facts: %d", code)
	}
	return out.Data
}

// factByID finds a fact by id.
func factByID(fs []memory.Fact, id int64) (memory.Fact, bool) {
	for _, f := range fs {
		if f.ID == id {
			return f, true
		}
	}
	return memory.Fact{}, false
}

// mcpTransports are the two ways a client reaches the tools: /mcp over
// HTTP, and the stdio server (over in-memory transports) wired on the same
// memory as `gateway mcp` wires it.
func mcpTransports(t *testing.T, cfg config.Config, g *testGateway) map[string]func(t *testing.T) *mcp.ClientSession {
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	return map[string]func(t *testing.T) *mcp.ClientSession{
		"http": func(t *testing.T) *mcp.ClientSession { return mcpOverHTTP(t, g.URL, nil) },
		"stdio": func(t *testing.T) *mcp.ClientSession {
			return mcpInMemory(t, mcpFor(cfg, g.mem.Core, logger).Server(memory.DefaultTenant))
		},
	}
}

// TestMCPToolsMatchTheManagementAPI: over each transport and on each
// store, the SDK's client searches (the same items as POST
// /v1/memory/search, within one conversation when asked), lists and reads
// conversations, adds, pins, unpins and deletes facts (seen alike by the
// management API), reads the facts and summary resources, previews the
// prompt, and erases a user only when confirm names that user.
func TestMCPToolsMatchTheManagementAPI(t *testing.T) {
	up := upstreamtest.New(t, recallUpstream())
	for store, mk := range recallConfigs(t, up) {
		t.Run(store, func(t *testing.T) {
			cfg := mk(t)
			g := startGateway(t, cfg)
			for transport, connect := range mcpTransports(t, cfg, g) {
				t.Run(transport, func(t *testing.T) {
					uid := "mcp-" + transport
					chat(t, g.URL, headers("", uid, "trip"), false, user("I am vegetarian and I live in Lisbon."))
					chat(t, g.URL, headers("", uid, "work"), false, user("My manager in Lisbon wants the report by Friday."))
					eventually(t, "both turns indexed", func() bool {
						items, err := g.mem.recall.Manager.Search(context.Background(), memory.DefaultTenant, uid, "Lisbon", 10)
						convs := map[string]bool{}
						for _, it := range items {
							convs[it.Conversation] = true
						}
						return err == nil && convs["trip"] && convs["work"]
					})
					cs := connect(t)

					tools, err := cs.ListTools(context.Background(), nil)
					if err != nil {
						t.Fatal(err)
					}
					var names []string
					for _, tool := range tools.Tools {
						names = append(names, tool.Name)
					}
					for _, want := range []string{"search_memory", "list_conversations", "read_conversation", "list_facts", "add_fact", "pin_fact", "unpin_fact", "delete_fact", "preview_prompt", "erase_user"} {
						if !slices.Contains(names, want) {
							t.Errorf("tool %s missing from %v", want, names)
						}
					}

					// Search: the management API's answer, item for item.
					var found struct{ Results []memory.Item }
					mustTool(t, cs, "search_memory", map[string]any{"user": uid, "query": "Lisbon", "top_k": 5}, &found)
					var api struct{ Data []memory.Item }
					apiCall(t, http.MethodPost, g.URL+"/v1/memory/search", nil, map[string]any{"user": uid, "query": "Lisbon", "top_k": 5}, &api)
					if len(found.Results) == 0 || !slices.EqualFunc(found.Results, api.Data, func(a, b memory.Item) bool { return a.ID == b.ID }) {
						t.Fatalf("search_memory = %+v, management API = %+v", found.Results, api.Data)
					}
					var inTrip struct{ Results []memory.Item }
					mustTool(t, cs, "search_memory", map[string]any{"user": uid, "query": "Lisbon", "conversation": "trip"}, &inTrip)
					if len(inTrip.Results) == 0 {
						t.Fatal("search in conversation trip found nothing")
					}
					for _, it := range inTrip.Results {
						if it.Conversation != "trip" {
							t.Fatalf("search in trip returned an item of %q", it.Conversation)
						}
					}
					if msg := callTool(t, cs, "search_memory", map[string]any{"user": uid, "query": "  "}, nil); !strings.Contains(msg, "query") {
						t.Fatalf("empty query: %q", msg)
					}
					if msg := callTool(t, cs, "search_memory", map[string]any{"user": "bad user!", "query": "x"}, nil); !strings.Contains(msg, "user") {
						t.Fatalf("bad user id: %q", msg)
					}

					// Conversations.
					var convs struct{ Conversations []memory.Conversation }
					mustTool(t, cs, "list_conversations", map[string]any{"user": uid}, &convs)
					if len(convs.Conversations) != 2 {
						t.Fatalf("list_conversations = %+v", convs.Conversations)
					}
					var read struct {
						Messages []struct{ Role, Content string }
					}
					mustTool(t, cs, "read_conversation", map[string]any{"user": uid, "conversation": "trip"}, &read)
					if len(read.Messages) != 2 || read.Messages[0].Content != "I am vegetarian and I live in Lisbon." {
						t.Fatalf("read_conversation = %+v", read.Messages)
					}
					if msg := callTool(t, cs, "read_conversation", map[string]any{"user": uid, "conversation": "nope"}, nil); !strings.Contains(msg, "not found") {
						t.Fatalf("unknown conversation: %q", msg)
					}

					// Facts: added, pinned, unpinned, deleted; the management API agrees.
					var added struct{ Fact memory.Fact }
					mustTool(t, cs, "add_fact", map[string]any{"user": uid, "type": "preference", "key": "seat", "value": "prefers a window seat"}, &added)
					if added.Fact.ID == 0 || added.Fact.Value != "prefers a window seat" {
						t.Fatalf("add_fact = %+v", added.Fact)
					}
					if msg := callTool(t, cs, "add_fact", map[string]any{"user": uid, "type": "mood", "key": "k", "value": "v"}, nil); !strings.Contains(msg, "type") {
						t.Fatalf("bad fact type: %q", msg)
					}
					mustTool(t, cs, "pin_fact", map[string]any{"user": uid, "id": added.Fact.ID}, nil)
					if f, ok := factByID(apiFacts(t, g.URL, uid, nil), added.Fact.ID); !ok || !f.Pinned {
						t.Fatalf("after pin_fact the API lists %+v", f)
					}
					var listed factsAnswer
					mustTool(t, cs, "list_facts", map[string]any{"user": uid}, &listed)
					if !slices.EqualFunc(listed.Facts, apiFacts(t, g.URL, uid, nil), func(a, b memory.Fact) bool { return a.ID == b.ID && a.Pinned == b.Pinned }) {
						t.Fatalf("list_facts = %+v", listed.Facts)
					}
					res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "memgate://users/" + uid + "/facts"})
					if err != nil {
						t.Fatal(err)
					}
					var resFacts factsAnswer
					if err := json.Unmarshal([]byte(res.Contents[0].Text), &resFacts); err != nil || !slices.EqualFunc(resFacts.Facts, listed.Facts, func(a, b memory.Fact) bool { return a.ID == b.ID }) {
						t.Fatalf("facts resource = %s (%v)", res.Contents[0].Text, err)
					}
					mustTool(t, cs, "unpin_fact", map[string]any{"user": uid, "id": added.Fact.ID}, nil)
					if f, ok := factByID(apiFacts(t, g.URL, uid, nil), added.Fact.ID); !ok || f.Pinned {
						t.Fatalf("after unpin_fact the API lists %+v", f)
					}

					// What the model would see carries the fact.
					var prev struct {
						Messages   []json.RawMessage
						TokensSent int `json:"tokens_sent"`
					}
					mustTool(t, cs, "preview_prompt", map[string]any{"user": uid, "question": "Where should I sit on my flight?", "conversation": "trip"}, &prev)
					if !strings.Contains(string(slices.Concat(prev.Messages...)), "prefers a window seat") || prev.TokensSent == 0 {
						t.Fatalf("preview_prompt = %+v", prev)
					}

					mustTool(t, cs, "delete_fact", map[string]any{"user": uid, "id": added.Fact.ID}, nil)
					if f, ok := factByID(apiFacts(t, g.URL, uid, nil), added.Fact.ID); ok {
						t.Fatalf("after delete_fact the API lists %+v", f)
					}

					// The summary resource: the newest version.
					for v, text := range []string{"First summary.", "They talked about Lisbon."} {
						err := g.mem.store.SaveSummary(context.Background(), memory.Summary{Tenant: memory.DefaultTenant, User: uid, Conversation: "trip", Version: v + 1, FromSeq: 1, ToSeq: 2, Text: text})
						if err != nil {
							t.Fatal(err)
						}
					}
					res, err = cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "memgate://users/" + uid + "/conversations/trip/summary"})
					if err != nil {
						t.Fatal(err)
					}
					var sum memory.Summary
					if err := json.Unmarshal([]byte(res.Contents[0].Text), &sum); err != nil || sum.Version != 2 || sum.Text != "They talked about Lisbon." {
						t.Fatalf("summary resource = %s (%v)", res.Contents[0].Text, err)
					}
					if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "memgate://users/" + uid + "/conversations/work/summary"}); err == nil {
						t.Fatal("a conversation without a summary must be not found")
					}

					// Erasure needs confirm to name the user.
					for _, confirm := range []string{"", "yes", "someone-else"} {
						if msg := callTool(t, cs, "erase_user", map[string]any{"user": uid, "confirm": confirm}, nil); !strings.Contains(msg, "confirm") {
							t.Fatalf("erase with confirm %q: %q", confirm, msg)
						}
					}
					mustTool(t, cs, "list_conversations", map[string]any{"user": uid}, &convs)
					if len(convs.Conversations) != 2 {
						t.Fatal("a refused erasure erased something")
					}
					mustTool(t, cs, "erase_user", map[string]any{"user": uid, "confirm": uid}, nil)
					var apiConvs struct{ Data []memory.Conversation }
					apiCall(t, http.MethodGet, g.URL+"/v1/memory/conversations?user="+uid, nil, nil, &apiConvs)
					mustTool(t, cs, "search_memory", map[string]any{"user": uid, "query": "Lisbon"}, &found)
					if len(apiConvs.Data) != 0 || len(found.Results) != 0 {
						t.Fatalf("after erase_user: conversations %+v, search %+v", apiConvs.Data, found.Results)
					}
				})
			}
		})
	}
}

// TestMCPAgentLoop drives the tools as an agent would: it searches the
// user's memory, finds nothing about their allergy, records it as a fact,
// and the user's next chat request carries it to the model.
func TestMCPAgentLoop(t *testing.T) {
	up := upstreamtest.New(t, recallUpstream())
	for store, mk := range recallConfigs(t, up) {
		t.Run(store, func(t *testing.T) {
			g := startGateway(t, mk(t))
			cs := mcpOverHTTP(t, g.URL, nil)
			const fact = "is allergic to peanuts"

			var found struct{ Results []memory.Item }
			mustTool(t, cs, "search_memory", map[string]any{"user": "agent-user", "query": "allergy peanuts"}, &found)
			for _, it := range found.Results {
				if strings.Contains(it.Text, "peanut") {
					t.Fatalf("nothing was said of peanuts yet: %+v", it)
				}
			}
			mustTool(t, cs, "add_fact", map[string]any{"user": "agent-user", "type": "limit", "key": "allergy", "value": fact}, nil)

			if r := chat(t, g.URL, headers("", "agent-user", "dinner"), false, user("What should I cook for dinner tonight?")); r.Status != http.StatusOK {
				t.Fatalf("chat: %d %s", r.Status, r.Body)
			}
			if prompt := lastChatPrompt(t, up); !strings.Contains(prompt, fact) {
				t.Fatalf("the fact added over MCP is not in the next prompt:\n%s", prompt)
			}
			if r := chat(t, g.URL, headers("", "someone-else", "dinner"), false, user("What should I cook for dinner tonight?")); r.Status != http.StatusOK {
				t.Fatalf("chat: %d", r.Status)
			}
			if prompt := lastChatPrompt(t, up); strings.Contains(prompt, fact) {
				t.Fatalf("another user's prompt carries the fact:\n%s", prompt)
			}
		})
	}
}
