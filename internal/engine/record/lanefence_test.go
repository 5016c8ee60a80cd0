package record

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// TestStalledLaneFencedFromAnotherLane: two lanes of one process share a
// store handle but not an in-process lock (a Worker and a Capturer with
// chat locks of their own). The Worker takes a chat's lock to store its
// first turn and stalls just before the save; its lock's lease runs out
// (its row gone, as when the process stalled past it), and the
// Capturer's lane takes the chat on the same handle and stores the
// chat's continuation, with the first turn as its history. The Worker's
// save names its own hold, which lost the lock: the store refuses it
// whatever hold of the handle had the chat since, and the Worker, the
// lock taken again, finds the turn stored ahead. The first turn is
// stored once, in the chat's conversation, not also in the default one.
func TestStalledLaneFencedFromAnotherLane(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memgate.db")
	st := mustSQLiteAt(t, path)
	first := chatTurn(t, "t1", "chat-x")
	first.Conversation = memory.DefaultConversation

	held := &heldFirstTurn{Saver: st, id: first.ID, reached: make(chan struct{}), release: make(chan struct{})}
	q := newFakeQueue()
	enqueue(t, q, first)
	o := workerWithStore(fastWorker(), st)
	o.Chats = NewChatLocks(st)
	w := NewWorker(q, held, nil, o)
	mustRunWorker(t, w)
	waitLong(t, "the Worker about to store the first turn", func() bool { return closed(held.reached) })

	// The Worker's lease runs out while it stalls.
	db, err := sql.Open("sqlite", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if res, err := db.Exec(`DELETE FROM chat_locks`); err != nil {
		t.Fatal(err)
	} else if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("the Worker holds %d chat lock rows, want 1", n)
	}

	next := exchange(t, NewExchangeID(), "plan a trip", "A2")
	next.Tenant, next.Conversation, next.Derived = "t1", "chat-x", true
	next.Prior = append(slices.Clone(first.Turn), first.Reply)
	c := mustCapturer(t, nil, st, nil, withStore(Options{Chats: NewChatLocks(st)}, st))
	c.Capture(context.Background(), next)
	waitLong(t, "the continuation stored", func() bool { return value(t, c.metrics.saved) > 0 })

	close(held.release)
	waitLong(t, "the first turn's entry acknowledged", func() bool {
		n, err := q.Pending(context.Background())
		return err == nil && n == 0
	})
	if got := texts(t, st, first.Identity); len(got) != 0 {
		t.Errorf("the default conversation holds %q, want nothing: the first turn stored twice", got)
	}
	chat := next.Identity
	if got, want := texts(t, st, chat), []string{"hi", "hello", "plan a trip", "A2"}; !slices.Equal(got, want) {
		t.Errorf("the chat's conversation holds %q, want %q", got, want)
	}
	if n := value(t, w.dead); n != 0 {
		t.Errorf("%v dead letters, want none", n)
	}
}
