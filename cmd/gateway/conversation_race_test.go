package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// gatedUpstream answers each chat completion "reply N: <last user
// message>", N counting the calls, after running gates[<last user
// message>] when there is one: a test holds a request at the upstream
// (routed and prepared, not yet answered, so not yet stored) until another
// one got there or was answered.
func gatedUpstream(gates map[string]func()) http.Handler {
	var n atomic.Int64
	return answeringUpstream(func(last string) string {
		if gate := gates[last]; gate != nil {
			gate()
		}
		return fmt.Sprintf("reply %d: %s", n.Add(1), last)
	})
}

// await waits for ch to close, for at most a deadline that only a broken
// interleaving reaches (the test then fails on what was stored).
func await(ch <-chan struct{}) {
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
	}
}

// TestChatsSharingAnOpenerInFlightTogether: two headerless full-history
// chats of one user open alike ("hi", answered differently), and their
// second turns are in flight together: both are routed while their
// derived conversation is still empty, then chat A's turn is stored, then
// chat B's. Chat B's turn must not supersede chat A's as an edit: it is
// stored in the branch its history continues, the one chat B's next
// request routes to, with its first turn; each chat keeps every turn live,
// once, in order — on both stores.
func TestChatsSharingAnOpenerInFlightTogether(t *testing.T) {
	for _, name := range []string{"sqlite", "postgres+redis"} {
		t.Run(name, func(t *testing.T) {
			bRouted, aStored := make(chan struct{}), make(chan struct{})
			up := upstreamtest.New(t, gatedUpstream(map[string]func(){
				// Chat A's turn is answered once chat B's got to the
				// upstream (routed to the empty derived conversation);
				// chat B's once chat A's was answered, so stored.
				"plan a trip":    func() { await(bRouted) },
				"write a letter": func() { close(bRouted); await(aStored) },
			}))
			g := startGateway(t, storeConfigs(t, up)[name](t))
			user := "inflight-" + strings.ReplaceAll(name, "+", "-")
			a, b := newForkChat(t, g.URL, user), newForkChat(t, g.URL, user)
			a.say("hi")
			b.say("hi")
			def := memory.Identity{Tenant: memory.DefaultTenant, User: user, Conversation: memory.DefaultConversation}
			waitStored(t, g, def, 4)

			type sent struct {
				conv string
				err  error
			}
			aDone, bDone := make(chan sent, 1), make(chan sent, 1)
			go func() {
				a.history = append(a.history, map[string]any{"role": "user", "content": "plan a trip"})
				conv, err := a.trySend()
				close(aStored)
				aDone <- sent{conv, err}
			}()
			go func() {
				b.history = append(b.history, map[string]any{"role": "user", "content": "write a letter"})
				conv, err := b.trySend()
				bDone <- sent{conv, err}
			}()
			ra, rb := <-aDone, <-bDone
			if ra.err != nil || rb.err != nil {
				t.Fatalf("chat A: %v; chat B: %v", ra.err, rb.err)
			}
			x := ra.conv
			if x == memory.DefaultConversation || rb.conv != x {
				t.Fatalf("chat A answered in %q, chat B in %q: want both in their derived conversation", x, rb.conv)
			}

			// Each chat goes on where its history is.
			if c := a.say("what shoes"); c != x {
				t.Fatalf("chat A's third turn in %q, want %q", c, x)
			}
			f := b.say("for a nurse")
			if f == x || f == memory.DefaultConversation {
				t.Fatalf("chat B's third turn in %q, want a conversation of its own", f)
			}
			lines := func(c *forkChat) []string {
				var out []string
				for _, m := range c.history[1:] {
					out = append(out, fmt.Sprintf("%s: %s", m["role"], m["content"]))
				}
				return out
			}
			assertConversation(t, g, user, x, lines(a)...)
			assertConversation(t, g, user, f, lines(b)...)
			assertConversations(t, g, user, map[string]int{x: 6, f: 6})
		})
	}
}
