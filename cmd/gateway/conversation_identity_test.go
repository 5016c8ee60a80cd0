package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// bodyUserChat sends one chat completion naming its user only in the body's
// "user" field (no memgate header) and returns the conversation memgate
// answered with.
func bodyUserChat(t *testing.T, url, user string, stream bool, msgs []map[string]any) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "user": user, "messages": msgs, "stream": stream})
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return resp.Header.Get("X-Memory-Conversation")
}

// fullHistoryChat runs turns of a chat whose client resends its whole
// history (after a system prompt) each time, every other turn streamed,
// and returns the conversation of each turn.
func fullHistoryChat(t *testing.T, url, user string, turns []string) []string {
	t.Helper()
	history := []map[string]any{{"role": "system", "content": "You are terse."}}
	var convs []string
	for i, text := range turns {
		history = append(history, map[string]any{"role": "user", "content": text})
		convs = append(convs, bodyUserChat(t, url, user, i%2 == 1, history))
		history = append(history, map[string]any{"role": "assistant", "content": "ack: " + text})
	}
	return convs
}

// storedContents returns a conversation's stored messages as
// "role: content" lines, and their Seqs.
func storedContents(t *testing.T, g *testGateway, id memory.Identity) ([]string, []int64) {
	t.Helper()
	msgs, err := g.mem.store.Recent(context.Background(), id, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var seqs []int64
	for _, m := range msgs {
		out = append(out, m.Role+": "+m.Content)
		seqs = append(seqs, m.Seq)
	}
	return out, seqs
}

// TestFullHistoryChatWithoutHeadersIsOneConversation: a client that names
// its user only in the body and resends its whole history sends its first
// turn alone, which lands in the user's default conversation; its second
// turn derives the chat's conversation and moves the first turn there. The
// 5-turn chat ends as one conversation holding its 10 messages once, in
// order, and nothing in default — on both stores. Two chats of one user
// that start differently, interleaved, stay apart; a newest-only client
// keeps its default conversation.
func TestFullHistoryChatWithoutHeadersIsOneConversation(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			g := startGateway(t, mk(t))
			user := "ana-" + strings.ReplaceAll(name, "+", "-")
			turns := []string{"I am Ana.", "I live in Lisbon.", "I have a cat.", "She is called Miso.", "What do you know?"}
			convs := fullHistoryChat(t, g.URL, user, turns)
			derived := convs[1]
			if convs[0] != memory.DefaultConversation || derived == memory.DefaultConversation {
				t.Fatalf("conversations %v: want the first turn answered in default, then a derived one", convs)
			}
			for i, c := range convs[1:] {
				if c != derived {
					t.Fatalf("turn %d in %q, want %q", i+2, c, derived)
				}
			}
			id := memory.Identity{Tenant: memory.DefaultTenant, User: user, Conversation: derived}
			waitStored(t, g, id, 10)
			got, seqs := storedContents(t, g, id)
			var want []string
			for _, text := range turns {
				want = append(want, "user: "+text, "assistant: ack: "+text)
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("stored:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			for i, s := range seqs {
				if s != int64(i+1) {
					t.Fatalf("seqs %v, want 1..10", seqs)
				}
			}
			list, err := g.mem.store.Conversations(context.Background(), memory.DefaultTenant, user)
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 1 || list[0].ID != derived || list[0].MessageCount != 10 {
				t.Fatalf("conversations %+v, want only %s with 10 messages", list, derived)
			}

			// The first turn is recalled in the chat's conversation, whether
			// it was indexed before or after it moved.
			eventually(t, "the first turn recalled in the chat's conversation", func() bool {
				rec, err := g.mem.recall.Recaller.Recall(context.Background(), memory.RecallQuery{
					Identity: id, Text: "Who am I? Ana", Now: time.Now(),
				})
				for _, it := range rec.Items {
					if err == nil && it.Kind == "message" && it.Ref == first(t, g, id).Key && it.Conversation == derived {
						return true
					}
				}
				return false
			})

			// Two chats of one user, interleaved, that start differently.
			two := user + "-two"
			a := fullHistoryChat(t, g.URL, two, []string{"Plan a trip to Rome."})
			b := fullHistoryChat(t, g.URL, two, []string{"Help me bake bread."})
			second := func(first, next string) string {
				return bodyUserChat(t, g.URL, two, false, []map[string]any{
					{"role": "system", "content": "You are terse."},
					{"role": "user", "content": first}, {"role": "assistant", "content": "ack: " + first},
					{"role": "user", "content": next},
				})
			}
			a = append(a, second("Plan a trip to Rome.", "Three days."))
			b = append(b, second("Help me bake bread.", "Sourdough."))
			if a[1] == b[1] || a[1] == memory.DefaultConversation || b[1] == memory.DefaultConversation {
				t.Fatalf("chats in %v and %v, want two derived conversations", a, b)
			}
			for chat, want := range map[string][]string{
				a[1]: {"user: Plan a trip to Rome.", "assistant: ack: Plan a trip to Rome.", "user: Three days.", "assistant: ack: Three days."},
				b[1]: {"user: Help me bake bread.", "assistant: ack: Help me bake bread.", "user: Sourdough.", "assistant: ack: Sourdough."},
			} {
				cid := memory.Identity{Tenant: memory.DefaultTenant, User: two, Conversation: chat}
				waitStored(t, g, cid, 4)
				if got, _ := storedContents(t, g, cid); strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Fatalf("%s stored:\n%s\nwant:\n%s", chat, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			}
			if got, _ := storedContents(t, g, memory.Identity{Tenant: memory.DefaultTenant, User: two, Conversation: memory.DefaultConversation}); len(got) != 0 {
				t.Fatalf("default still holds %q", got)
			}

			// A newest-only client stays in its default conversation.
			solo := user + "-solo"
			for i := range 3 {
				c := bodyUserChat(t, g.URL, solo, i == 1, []map[string]any{{"role": "user", "content": fmt.Sprintf("note %d", i)}})
				if c != memory.DefaultConversation {
					t.Fatalf("newest-only turn %d in %q, want default", i, c)
				}
				waitStored(t, g, memory.Identity{Tenant: memory.DefaultTenant, User: solo, Conversation: memory.DefaultConversation}, 2*(i+1))
			}
		})
	}
}

// first returns the conversation's first stored message.
func first(t *testing.T, g *testGateway, id memory.Identity) memory.Message {
	t.Helper()
	_, msgs, err := g.mem.store.Conversation(context.Background(), id)
	if err != nil || len(msgs) == 0 {
		t.Fatalf("conversation %s: %d messages, %v", id.Conversation, len(msgs), err)
	}
	return msgs[0]
}

// TestFullHistoryChatThroughRun: the 5-turn headerless full-history chat
// through `gateway serve` (run) ends, as the management API lists it, as
// one conversation holding its 10 messages in order, and nothing else.
func TestFullHistoryChatThroughRun(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	url, _ := mustServe(t, up)
	turns := []string{"I am Ana.", "I live in Lisbon.", "I have a cat.", "She is called Miso.", "What do you know?"}
	convs := fullHistoryChat(t, url, "ana-run", turns)
	derived := convs[len(convs)-1]
	var want []string
	for _, text := range turns {
		want = append(want, "user: "+text, "assistant: ack: "+text)
	}
	var got []string
	eventually(t, "the chat stored as one conversation", func() bool {
		var list struct {
			Data []memory.Conversation `json:"data"`
		}
		if apiCall(t, http.MethodGet, url+"/v1/memory/conversations?user=ana-run", nil, nil, &list) != 200 ||
			len(list.Data) != 1 || list.Data[0].ID != derived || list.Data[0].MessageCount != 10 {
			return false
		}
		var conv struct {
			Messages []memory.Message `json:"messages"`
		}
		if apiCall(t, http.MethodGet, url+"/v1/memory/conversations/"+derived+"?user=ana-run", nil, nil, &conv) != 200 {
			return false
		}
		got = got[:0]
		for _, m := range conv.Messages {
			got = append(got, m.Role+": "+m.Content)
		}
		return strings.Join(got, "\n") == strings.Join(want, "\n")
	})
}
