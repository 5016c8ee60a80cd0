package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/dialect/dialecttest"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// toolUpstream answers a request whose last message is a tool result with
// the weather, one whose last user message asks about the weather with a
// get_weather call, and anything else with "ack: <last user text>".
func toolUpstream() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			Messages []json.RawMessage `json:"messages"`
		}
		json.Unmarshal(body, &req)
		var last, lastUser memory.Message
		for _, raw := range req.Messages {
			if m, err := memory.ParseMessage(raw); err == nil {
				last = m
				if m.Role == "user" {
					lastUser = m
				}
			}
		}
		reply := upstreamtest.Reply{Content: "ack: " + lastUser.Content}
		switch {
		case last.Role == "tool":
			reply = upstreamtest.Reply{Content: "Sunny and 24C in Kyoto."}
		case strings.Contains(lastUser.Content, "weather"):
			reply = upstreamtest.Reply{ToolCalls: []upstreamtest.ToolCall{{ID: "call_w1", Name: "get_weather", Arguments: `{"city":"Kyoto"}`}}}
		}
		upstreamtest.Chat(reply).ServeHTTP(w, r)
	})
}

// sdkResult is what chat_memory.mjs prints.
type sdkResult struct {
	Conversations []string `json:"conversations"`
	Replies       []string `json:"replies"`
}

func runChatSDK(t *testing.T, url, scenario string, headers map[string]string) sdkResult {
	t.Helper()
	h, _ := json.Marshal(headers)
	out := dialecttest.RunScript(t, "chat_memory.mjs", "OPENAI_BASE_URL="+url+"/v1", "SCENARIO="+scenario, "SDK_HEADERS="+string(h))
	var r sdkResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("script output %s: %v", out, err)
	}
	return r
}

// TestSDKBodyUserFullHistoryIsOneConversation: the official OpenAI Node SDK
// naming the user only in the body's "user" field and resending its whole
// history each turn: from the second turn on every turn lands in one
// derived conversation, which ends holding the chat once (2 messages per
// turn, not a growing copy per request), its first turn included: that
// turn, answered in the default conversation, moved into the chat's, and
// the user has no other conversation.
func TestSDKBodyUserFullHistoryIsOneConversation(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	g := startGateway(t, storeConfigs(t, up)["sqlite"](t))
	r := runChatSDK(t, g.URL, "full-history", nil)
	if len(r.Conversations) != 5 {
		t.Fatalf("conversations %v", r.Conversations)
	}
	if r.Conversations[0] != memory.DefaultConversation {
		t.Errorf("first turn (nothing resent yet) in %q, want %q", r.Conversations[0], memory.DefaultConversation)
	}
	derived := r.Conversations[1]
	if derived == memory.DefaultConversation || !memory.ValidID(derived) {
		t.Fatalf("second turn in %q, want a derived id", derived)
	}
	for i, c := range r.Conversations[1:] {
		if c != derived {
			t.Fatalf("turn %d in %q, want %q: %v", i+2, c, derived, r.Conversations)
		}
	}
	msgs := waitStored(t, g, memory.Identity{Tenant: memory.DefaultTenant, User: "ana-body-user", Conversation: derived}, 10)
	for i, want := range []string{"I am Ana.", "ack: I am Ana.", "I live in Lisbon."} {
		if msgs[i].Content != want {
			t.Fatalf("stored message %d = %q, want %q", i, msgs[i].Content, want)
		}
	}
	list, err := g.mem.store.Conversations(context.Background(), memory.DefaultTenant, "ana-body-user")
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != derived || list[0].MessageCount != 10 {
		t.Fatalf("conversations %+v, want only %s with 10 messages", list, derived)
	}
}

// TestSDKToolLoopKeepsContext: a newest-only client (the official OpenAI
// Node SDK, X-Memory-User only) sends [user, assistant(tool_calls), tool] on
// its tool-result turn; memgate prepends the earlier turns ("I'm in Kyoto")
// and stores nothing twice.
func TestSDKToolLoopKeepsContext(t *testing.T) {
	up := upstreamtest.New(t, toolUpstream())
	g := startGateway(t, storeConfigs(t, up)["sqlite"](t))
	r := runChatSDK(t, g.URL, "tool-loop", map[string]string{"X-Memory-User": "kenji"})
	for _, c := range r.Conversations {
		if c != memory.DefaultConversation {
			t.Fatalf("conversations %v, want the user's default conversation throughout", r.Conversations)
		}
	}
	got := strings.Join(upstreamTexts(t, up), "\n")
	for _, want := range []string{"user: I'm in Kyoto.", "assistant: ack: I'm in Kyoto.", "tool: {\"sky\":\"sunny\",\"c\":24}"} {
		if !strings.Contains(got, want) {
			t.Errorf("tool-result turn upstream lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "What's the weather there?"); n != 1 {
		t.Errorf("the question went upstream %d times, want once:\n%s", n, got)
	}
	msgs := waitStored(t, g, memory.Identity{Tenant: memory.DefaultTenant, User: "kenji", Conversation: memory.DefaultConversation}, 6)
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.Role)
	}
	if strings.Join(roles, ",") != "user,assistant,user,assistant,tool,assistant" {
		t.Fatalf("stored roles %v, want each message once", roles)
	}
}
