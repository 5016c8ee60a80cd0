package record

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// deepStore is what the tests of edits deep in a long chat need of a
// store: its live messages and the inspector's superseded ones.
type deepStore interface {
	middleStore
	Branches(ctx context.Context, id memory.Identity, limit int) ([]memory.Branch, error)
}

// TestCaptureKeepsMessagesAfterDeepEdit: a full-history client whose chat
// grew past what one request stores (the first memory.BranchHead and the
// newest 2,000, the default) edits one message deep in the part its
// requests no longer store (its message 500, stored when it was among the
// newest). The edited message's old text leaves the live branch (the
// inspector lists it superseded, alone) and its new text takes its place,
// listed once; every other message stored before stays live, those
// between the edit and the window included, and the turn stores its own
// two messages, nothing again. A client that rewrites an old message on
// every request (the same one, or another) stores two messages and the
// new text per request, never its window again. A client
// that forks there (every message after the edit differs) still has the
// stored branch superseded from the edit on, its window stored after it.
// Both stores.
func TestCaptureKeepsMessagesAfterDeepEdit(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) { testDeepEdit(t, backend) })
	}
}

func testDeepEdit(t *testing.T, backend string) {
	const keep, whole, grown, at = 2000, 2200, 2700, 500
	s, queue := openMiddle(t, backend)
	store := s.(deepStore)
	// Each turn's Capture returns once it is stored, however slow the
	// machine (-race): the test reads the conversation right after.
	c := mustCapturer(t, queue, store, nil, withStore(Options{SaveWait: 5 * time.Minute, OpTimeout: time.Minute}, store))
	ctx := context.Background()
	setup := func(t *testing.T) (*longChat, memory.Identity) {
		t.Helper()
		id := memory.Identity{Tenant: "t1", User: fmt.Sprint("u-deep-", time.Now().UnixNano()), Conversation: "c-long"}
		ch := &longChat{t: t, c: c, id: id, keep: keep}
		ch.grow(whole)
		ch.send(1) // stored whole: positions 0..2201
		ch.grow(grown)
		if ex := ch.send(2); ex.Skipped == 0 || at >= memory.BranchHead+ex.Skipped {
			t.Fatal("the second turn's cut does not leave the edited message out")
		}
		return ch, id
	}
	live := func(t *testing.T, id memory.Identity) []string {
		t.Helper()
		msgs, err := store.Recent(ctx, id, 10*grown)
		if err != nil {
			t.Fatal(err)
		}
		return contentsOf(msgs)
	}
	superseded := func(t *testing.T, id memory.Identity) []string {
		t.Helper()
		bs, err := store.Branches(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, b := range bs {
			out = append(out, contentsOf(b.Messages)...)
		}
		return out
	}

	t.Run("edited", func(t *testing.T) {
		ch, id := setup(t)
		if got, want := live(t, id), contentsOf(ch.history); !slices.Equal(got, want) {
			t.Fatalf("before the edit the conversation holds %d messages, want the %d of the history", len(got), len(want))
		}
		ch.history[at].Content = "message 500, as the user rewrote it"
		ex := ch.send(3)
		// The edited message's new text takes its place. Every other
		// message stays live, 501..(len-2000) included.
		want := contentsOf(ch.history)
		if got := live(t, id); !slices.Equal(got, want) {
			t.Fatalf("after the edit the conversation holds %d messages (%s), want %d (%s)", len(got), around(got, at), len(want), around(want, at))
		}
		if got := superseded(t, id); !slices.Equal(got, []string{fmt.Sprint("message ", at)}) {
			t.Fatalf("the inspector lists %d superseded messages (%.80q), want the edited one's old text", len(got), got)
		}
		if at+1 >= memory.BranchHead+ex.Skipped {
			t.Fatal("no unchanged message between the edit and the window")
		}
		// The client goes on, rewriting an old message on every request:
		// each request stores its two messages and the new text, and
		// supersedes only the text it changed.
		edits := 1
		for n, pos := range []int{at, 510, at, 650, 650} {
			ch.history[pos].Content = fmt.Sprintf("message %d, rewritten at turn %d", pos, 4+n)
			ch.send(4 + n)
			edits++
			want := contentsOf(ch.history)
			if got := live(t, id); !slices.Equal(got, want) {
				t.Fatalf("after turn %d the conversation holds %d messages (%s), want %d (%s)", 4+n, len(got), around(got, pos), len(want), around(want, pos))
			}
			if got := len(superseded(t, id)); got != edits {
				t.Fatalf("after turn %d the inspector lists %d superseded messages, want %d (one per edit): the window was stored again", 4+n, got, edits)
			}
		}
		if got := value(t, c.metrics.rewinds); got != 0 {
			t.Fatalf("counted %v rewinds, want none", got)
		}
		checkStampsAsStored(t, store, id, ch.history)
	})

	// A chat that, after an edit, shrinks below what one request stores
	// (its newest messages deleted) is stored whole again, its new
	// messages stamped as the client sends them, not as the Amend before
	// them says; grown long again, its requests still check what their
	// cut leaves out: a later edit deep in it is still seen (its stored
	// copy superseded).
	t.Run("shrunk and grown", func(t *testing.T) {
		ch, id := setup(t)
		ch.history[at].Content = "message 500, as the user rewrote it"
		ch.send(3)
		ch.history = ch.history[:whole-200]
		ch.send(4) // stored whole: what was stored past it is superseded
		ch.grow(2 * grown)
		ch.send(5) // cut, past the messages the fourth turn stamped
		const later = 800
		if slices.Contains(superseded(t, id), fmt.Sprint("message ", later)) {
			t.Fatalf("message %d superseded before its edit", later)
		}
		ch.history[later].Content = "message 800, as the user rewrote it"
		ch.send(6)
		if got := superseded(t, id); !slices.Contains(got, fmt.Sprint("message ", later)) {
			t.Fatalf("the edit of message %d went unseen: its stored copy is not superseded", later)
		}
	})

	t.Run("forked", func(t *testing.T) {
		ch, id := setup(t)
		before := value(t, c.metrics.rewinds)
		for i := at; i < len(ch.history); i++ {
			ch.history[i].Content = fmt.Sprint("forked message ", i)
		}
		ch.send(3)
		window := ch.history[len(ch.history)-2-keep : len(ch.history)-2]
		want := append(contentsOf(ch.history[:at]), contentsOf(window)...)
		want = append(want, "question 3", "answer 3")
		if got := live(t, id); !slices.Equal(got, want) {
			t.Fatalf("after the fork the conversation holds %d messages (%s), want %d (%s)", len(got), around(got, at), len(want), around(want, at))
		}
		if got := value(t, c.metrics.rewinds); got != before+1 {
			t.Fatalf("counted %v rewinds, want one", got-before)
		}
	})
}

// BenchmarkCaptureDeepEdit captures turn after turn of a full-history chat
// of 60,000 messages of about 300 bytes on SQLite, cut at the default
// 2,000, whose client rewrites its message 500 before every request: the
// check finds the edit, and the save supersedes that message and amends
// one row (before the Amends: a rewind, which superseded every message
// after it and stored the window again).
func BenchmarkCaptureDeepEdit(b *testing.B) {
	const keep, long, at = 2000, 60000, 500
	store := mustSQLite(b)
	c := mustCapturer(b, store.Outbox(), store, nil, withStore(Options{}, store))
	id := memory.Identity{Tenant: "t1", User: "u1", Conversation: "c-long"}
	msgs := make([]memory.Message, 0, long+2*(b.N+100)+1)
	grow := func(to int) {
		for i := len(msgs); i < to; i++ {
			msgs = append(msgs, memory.Message{Role: []string{"user", "assistant"}[i%2], Content: fmt.Sprintf("%0300d", i)})
		}
	}
	n := 0
	turn := func() {
		n++
		q := memory.Message{Role: "user", Content: fmt.Sprint("question ", n)}
		req := append(msgs, q)
		cut := memory.CutRequest(req, keep)
		ex := withResent(memory.Exchange{ID: fmt.Sprint("req-", n), Identity: id, Model: "m", Prior: cut.Prior, Turn: cut.Turn,
			Skipped: cut.Skipped, Reply: memory.Message{Role: "assistant", Content: fmt.Sprint("answer ", n)}}, req, cut)
		c.Capture(context.Background(), ex)
		msgs = append(msgs, q, ex.Reply)
	}
	// The chat grows with memgate: every message is stored once, when
	// among the newest.
	for size := 2200; size < long; size += keep - 100 {
		grow(size)
		turn()
	}
	grow(long)
	turn()
	b.ResetTimer()
	for b.Loop() {
		msgs[at].Content = fmt.Sprintf("%0300d, rewritten at turn %d", at, n)
		turn()
	}
}
