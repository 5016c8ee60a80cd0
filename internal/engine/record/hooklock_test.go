package record

import (
	"context"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// TestSlowHookHoldsNoChatLock: a Worker's after-save hooks (a summariser
// calling a side model, say) run after the chat's lock is released:
// while a hook over a chat's first turn hangs, the Capturer sharing the
// Worker's chat locks stores that chat's continuation at once.
func TestSlowHookHoldsNoChatLock(t *testing.T) {
	st := &fencedStore{fakeSaver: newFakeSaver(), refused: true}
	chats := NewChatLocks(st)
	entered, release := make(chan struct{}), make(chan struct{})
	hook := HookFunc(func(ctx context.Context, exs []memory.Exchange, _ []memory.SaveResult) error {
		select {
		case <-entered:
		default:
			close(entered)
		}
		<-release
		return nil
	})
	defer close(release)

	first := chatTurn(t, "t1", "chat-x")
	first.Conversation = memory.DefaultConversation
	q := newFakeQueue()
	enqueue(t, q, first)
	o := fastWorker()
	o.Hooks, o.Chats = []Hook{hook}, chats
	mustRunWorker(t, NewWorker(q, st, nil, o))
	<-entered

	next := exchange(t, NewExchangeID(), "plan a trip", "A2")
	next.Tenant, next.Conversation, next.Derived = "t1", "chat-x", true
	next.Prior = append(first.Turn, first.Reply)
	c := mustCapturer(t, nil, st, nil, Options{Chats: chats})
	c.Capture(context.Background(), next)
	waitFor(t, "the continuation stored while the hook hangs", func() bool {
		for _, id := range st.ids() {
			if ex, _ := st.get(id); ex.RequestID == next.ID {
				return true
			}
		}
		return false
	})
}
