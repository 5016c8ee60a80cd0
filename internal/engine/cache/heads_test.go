package cache_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
)

// headCounting counts the SQL reads of a conversation's first messages.
type headCounting struct {
	*sqlite.Store
	reads *atomic.Int64
}

func (c headCounting) MessagesAfter(ctx context.Context, id memory.Identity, afterSeq int64, limit int) ([]memory.Message, error) {
	c.reads.Add(1)
	return c.Store.MessagesAfter(ctx, id, afterSeq, limit)
}

// TestHeadReadOnceAsAChatGoesOn: a chat whose client resends its history
// has its conversation's first messages read from the store once; each of
// its saves through the Reads extends them, so its next turn reads
// nothing. Whatever else changes the user's messages — another
// conversation's turn, an edit (a regeneration superseding turns), a
// change in SQL, the conversation deleted, the user erased — makes the
// next Head read the store again, and no Head ever answers other than the
// store would.
func TestHeadReadOnceAsAChatGoesOn(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memgate.db")
	st, db := openSQLite(t, path), rawDB(t, path)
	var reads atomic.Int64
	r := cache.NewReads(headCounting{st, &reads}, nil, cache.DefaultTailBytes, cache.DefaultKnowledgeBytes)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "chat-x"}
	other := id
	other.Conversation = "chat-y"
	var history []memory.Message // what the chat's client resends
	turn := 0
	save := func(id memory.Identity, prior []memory.Message, q string) []memory.Message {
		t.Helper()
		turn++
		ex := memory.Exchange{ID: fmt.Sprint("ex", turn), Identity: id, At: time.Now(), Prior: prior,
			Turn: []memory.Message{{Role: "user", Content: q}}, Reply: memory.Message{Role: "assistant", Content: "re: " + q}}
		if _, err := r.SaveExchange(ctx, ex); err != nil {
			t.Fatal(err)
		}
		return append(slices.Clone(prior), ex.Turn[0], ex.Reply)
	}
	head := func(step string, n int, wantReads int64) {
		t.Helper()
		rev, err := st.ItemRevisions(ctx, id.Tenant, id.User)
		if err != nil {
			t.Fatal(err)
		}
		before := reads.Load()
		got, err := r.Head(ctx, &rev, id, n)
		if err != nil {
			t.Fatal(err)
		}
		if got := reads.Load() - before; got != wantReads {
			t.Fatalf("%s: %d SQL reads, want %d", step, got, wantReads)
		}
		msgs, err := st.MessagesAfter(ctx, id, 0, n)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]memory.Print, len(msgs))
		for i, m := range msgs {
			want[i] = m.Print()
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: Head(%d) holds %d prints, not those of the %d first live messages", step, n, len(got), len(want))
		}
		// HeadHeld answers from the same entry, with the seqs.
		before = reads.Load()
		held, err := r.HeadHeld(ctx, &rev, id, n)
		if err != nil {
			t.Fatal(err)
		}
		if got := reads.Load() - before; got != 0 {
			t.Fatalf("%s: HeadHeld after Head read SQL %d times", step, got)
		}
		wantHeld := make([]memory.Held, len(msgs))
		for i, m := range msgs {
			wantHeld[i] = m.Held()
		}
		if !slices.Equal(held, wantHeld) {
			t.Fatalf("%s: HeadHeld(%d) = %v, want %v", step, n, held, wantHeld)
		}
	}
	history = save(id, nil, "q1")
	head("first", len(history)+2, 1)
	head("unchanged", len(history)+2, 0)
	for i := range 3 {
		history = save(id, history, fmt.Sprint("q", i+2))
		head("the chat going on", len(history)+2, 0)
	}
	head("fewer", 2, 0)

	save(other, nil, "elsewhere")
	head("after a turn of another conversation", len(history)+2, 1)

	history = save(id, history[:2], "q2 again") // a regeneration supersedes
	head("after an edit", len(history)+2, 1)
	head("after an edit, again", len(history)+2, 0)

	if _, err := db.ExecContext(ctx, `UPDATE messages SET content = 'changed' WHERE conversation = 'chat-x' AND seq = 1`); err != nil {
		t.Fatal(err)
	}
	head("after a change in SQL", len(history)+2, 1)

	if err := st.DeleteConversation(ctx, id); err != nil {
		t.Fatal(err)
	}
	head("after the conversation was deleted", len(history)+2, 1)
	history = save(id, nil, "anew") // extends the empty head just read
	head("stored anew", len(history)+2, 0)

	if err := r.DeleteUser(ctx, id.Tenant, id.User); err != nil {
		t.Fatal(err)
	}
	head("after the user's erasure", len(history)+2, 1)
}
