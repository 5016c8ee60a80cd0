package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestLongChatEditInUnstoredMiddle: a headerless full-history chat grows
// past what one request stores (capture.max_history_messages newest and
// memory.BranchHead first messages); the user then edits a message memgate
// stored when it was among the newest, which its requests now leave out.
// Through the gateway, on both stores, the stored copy of that message
// alone leaves the live branch (the old text is no longer the
// conversation's) and its new text takes its place, listed once and
// recalled in another conversation; every other message stays live, the
// turn is stored once, in the same conversation, and the next turn stores
// only itself.
func TestLongChatEditInUnstoredMiddle(t *testing.T) {
	const keep = 20
	up := upstreamtest.New(t, echoUpstream())
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			g, user, chat := startLongChat(t, mk, keep, "longedit-", name)
			lines := func() []string { // the chat's non-system messages as stored lines
				var out []string
				for _, m := range chat.history[1:] {
					out = append(out, fmt.Sprintf("%s: %s", m["role"], m["content"]))
				}
				return out
			}
			chat.grow(memory.BranchHead + keep - 6)
			conv := chat.say("q1") // stored whole
			id := memory.Identity{Tenant: memory.DefaultTenant, User: user, Conversation: conv}
			waitStored(t, g, id, len(chat.history)-1)
			chat.grow(len(chat.history) - 1 + 40)
			if c := chat.say("q2"); c != conv { // cut: 20 of its messages were never stored
				t.Fatalf("the second turn went to %q, want %q", c, conv)
			}
			stored := memory.BranchHead + keep - 6 + 2 + keep + 2
			waitStored(t, g, id, stored)
			before, _ := liveAndSuperseded(t, g, id)

			const edited = memory.BranchHead + 6 // stored by the first turn, left out since
			const rewritten = "message 262, rewritten: my zebra Quillfeather adores tangerines"
			chat.history[1+edited]["content"] = rewritten
			if c := chat.say("q3"); c != conv {
				t.Fatalf("the edited chat went to %q, want %q", c, conv)
			}
			old := slices.Index(before, fmt.Sprint("user: message ", edited))
			if old != edited {
				t.Fatalf("the edited message was stored at %d, want %d", old, edited)
			}
			want := slices.Clone(before)
			want[edited] = "user: " + rewritten
			want = append(want, lines()[len(lines())-2:]...)
			waitStored(t, g, id, len(want))
			live, superseded := liveAndSuperseded(t, g, id)
			if strings.Join(live, "\n") != strings.Join(want, "\n") {
				t.Fatalf("after the edit %s holds %d messages, want %d:\n%s", conv, len(live), len(want), strings.Join(live[edited-2:edited+3], "\n"))
			}
			if superseded != 1 {
				t.Fatalf("%d messages superseded, want the edited one only", superseded)
			}
			if c := chat.say("q4"); c != conv {
				t.Fatalf("the next turn went to %q, want %q", c, conv)
			}
			want = append(want, "user: q4", "assistant: ack: q4")
			waitStored(t, g, id, len(want))
			if live, n := liveAndSuperseded(t, g, id); strings.Join(live, "\n") != strings.Join(want, "\n") || n != superseded {
				t.Fatalf("the next turn left %d messages (%d superseded), want %d (%d)", len(live), n, len(want), superseded)
			}
			// The conversation counts its live messages.
			assertConversations(t, g, user, map[string]int{conv: len(want)})
			// The new text is indexed like any stored message: a question
			// in another conversation recalls it.
			eventually(t, "the new text to be indexed", func() bool {
				items, err := g.mem.recall.Manager.Search(context.Background(), memory.DefaultTenant, user, "zebra Quillfeather", 5)
				return err == nil && slices.ContainsFunc(items, func(it memory.Item) bool { return strings.Contains(it.Text, "Quillfeather") })
			})
			const question = "What fruit does my zebra Quillfeather adore?"
			if c := newForkChat(t, g.URL, user).say(question); c == conv {
				t.Fatalf("a new chat went to %q, the edited one's", c)
			}
			if prompt := promptWith(t, up, question); !strings.Contains(prompt, "adores tangerines") {
				t.Fatalf("the question in another conversation does not recall the new text; prompt:\n%s", prompt)
			}
		})
	}
}

// promptWith returns the text of every message of the last chat request
// upstream whose last message is question.
func promptWith(t *testing.T, up *upstreamtest.Server, question string) string {
	t.Helper()
	reqs := up.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		var req struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if reqs[i].Path != "/v1/chat/completions" || json.Unmarshal(reqs[i].Body, &req) != nil || len(req.Messages) == 0 {
			continue
		}
		if last, err := memory.ParseMessage(req.Messages[len(req.Messages)-1]); err != nil || last.Content != question {
			continue
		}
		var b strings.Builder
		for _, raw := range req.Messages {
			m, err := memory.ParseMessage(raw)
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString(m.Role + ": " + m.Content + "\n")
		}
		return b.String()
	}
	t.Fatalf("no chat request asking %q reached the upstream", question)
	return ""
}

// startLongChat starts a gateway of store config mk (storeConfigs' name)
// that stores a long chat's history cut to its head and its newest keep
// messages, and returns it with a chat of user prefix+name. It indexes
// with the hashed embedder: these tests check where text is stored and
// what derives from it, not the encoder, which indexing a chat's 2,000
// messages on a busy CI machine outlasted their minute's waits.
func startLongChat(t *testing.T, mk func(*testing.T) config.Config, keep int, prefix, name string) (*testGateway, string, *forkChat) {
	t.Helper()
	cfg := mk(t)
	cfg.Capture.MaxHistoryMessages = keep
	cfg.Recall.Embeddings.Provider = "local"
	g := startGateway(t, cfg)
	user := prefix + strings.ReplaceAll(name, "+", "-")
	return g, user, newForkChat(t, g.URL, user)
}
