package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestContinueAdoptsOnlyItsOwnFirstTurn: two headerless full-history chats
// of one user open with the same message ("hi"), answered differently,
// both first turns stored in default. The older chat then asks the model
// to go on with its first reply ("continue"). Its derived conversation
// must take over that chat's own first turn — never the other chat's,
// whose reply differs, and which must stay live, not superseded.
func TestContinueAdoptsOnlyItsOwnFirstTurn(t *testing.T) {
	var n atomic.Int64
	up := upstreamtest.New(t, continuingUpstreamCounting(&n))
	for name, mk := range storeConfigs(t, up) {
		t.Run(name, func(t *testing.T) {
			g := startGateway(t, mk(t))
			user := "contadopt-" + strings.ReplaceAll(name, "+", "-")
			sys := map[string]any{"role": "system", "content": "You are terse."}
			hi := map[string]any{"role": "user", "content": "hi there, tell me something"}
			if conv := bodyUserChat(t, g.URL, user, false, []map[string]any{sys, hi}); conv != memory.DefaultConversation {
				t.Fatalf("chat B's first turn in %q", conv)
			}
			def := memory.Identity{Tenant: memory.DefaultTenant, User: user, Conversation: memory.DefaultConversation}
			waitStored(t, g, def, 2)
			if conv := bodyUserChat(t, g.URL, user, false, []map[string]any{sys, hi}); conv != memory.DefaultConversation {
				t.Fatalf("chat A's first turn in %q", conv)
			}
			waitStored(t, g, def, 4)
			live, _ := storedContents(t, g, def)
			replyB := strings.TrimPrefix(live[1], "assistant: ")
			replyA := strings.TrimPrefix(live[3], "assistant: ")
			// Chat B goes on with its reply.
			x := bodyUserChat(t, g.URL, user, false, []map[string]any{sys, hi, {"role": "assistant", "content": replyB}})
			id := memory.Identity{Tenant: memory.DefaultTenant, User: user, Conversation: x}
			waitStored(t, g, id, 2)
			got, superseded := liveAndSuperseded(t, g, id)
			want := []string{"user: " + hi["content"].(string), "assistant: " + replyB + " (more)"}
			defLive, _ := storedContents(t, g, def)
			if fmt.Sprint(got) != fmt.Sprint(want) || superseded > 0 && !strings.Contains(strings.Join(defLive, "\n"), replyA) {
				t.Fatalf("%s holds %q (%d superseded), want %q; default holds %q (chat A's reply %q must stay live)", x, got, superseded, want, defLive, replyA)
			}
			for _, l := range defLive {
				if l == "assistant: "+replyB {
					t.Fatalf("chat B's partial reply stayed in default %q while chat A's was adopted and superseded", defLive)
				}
			}
		})
	}
}

// continuingUpstreamCounting answers a turn "reply <n>: <message>", n
// counting every request, and a request ending with an assistant message
// " (more)".
func continuingUpstreamCounting(n *atomic.Int64) http.Handler {
	return goingOnUpstream(func(last string, goOn bool) string {
		answer := fmt.Sprintf("reply %d: %s", n.Add(1), last)
		if goOn {
			answer = " (more)"
		}
		return answer
	})
}
