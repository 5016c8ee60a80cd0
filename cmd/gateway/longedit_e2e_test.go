package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestLongChatEditInUnstoredMiddle: a headerless full-history chat grows
// past what one request stores (capture.max_history_messages newest and
// memory.BranchHead first messages); the user then edits a message memgate
// stored when it was among the newest, which its requests now leave out.
// Through the gateway, on both stores, the stored copy of that message
// alone leaves the live branch (the old text is no longer the
// conversation's; the new one is in the cut, unstored), every other
// message stays live, the turn is stored once, in the same conversation,
// and the next turn stores only itself.
func TestLongChatEditInUnstoredMiddle(t *testing.T) {
	const keep = 20
	up := upstreamtest.New(t, echoUpstream())
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			cfg := mk(t)
			cfg.Capture.MaxHistoryMessages = keep
			g := startGateway(t, cfg)
			user := "longedit-" + strings.ReplaceAll(name, "+", "-")
			chat := newForkChat(t, g.URL, user)
			grow := func(n int) { // the history's non-system messages, up to n
				for i := len(chat.history) - 1; i < n; i++ {
					chat.history = append(chat.history, map[string]any{"role": []string{"user", "assistant"}[i%2], "content": fmt.Sprint("message ", i)})
				}
			}
			lines := func() []string { // the chat's non-system messages as stored lines
				var out []string
				for _, m := range chat.history[1:] {
					out = append(out, fmt.Sprintf("%s: %s", m["role"], m["content"]))
				}
				return out
			}
			grow(memory.BranchHead + keep - 6)
			conv := chat.say("q1") // stored whole
			id := memory.Identity{Tenant: memory.DefaultTenant, User: user, Conversation: conv}
			waitStored(t, g, id, len(chat.history)-1)
			grow(len(chat.history) - 1 + 40)
			if c := chat.say("q2"); c != conv { // cut: 20 of its messages were never stored
				t.Fatalf("the second turn went to %q, want %q", c, conv)
			}
			stored := memory.BranchHead + keep - 6 + 2 + keep + 2
			waitStored(t, g, id, stored)
			before, _ := liveAndSuperseded(t, g, id)

			const edited = memory.BranchHead + 6 // stored by the first turn, left out since
			chat.history[1+edited]["content"] = "message 262, rewritten"
			if c := chat.say("q3"); c != conv {
				t.Fatalf("the edited chat went to %q, want %q", c, conv)
			}
			old := slices.Index(before, fmt.Sprint("user: message ", edited))
			if old != edited {
				t.Fatalf("the edited message was stored at %d, want %d", old, edited)
			}
			want := append(slices.Delete(slices.Clone(before), edited, edited+1), lines()[len(lines())-2:]...)
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
		})
	}
}
