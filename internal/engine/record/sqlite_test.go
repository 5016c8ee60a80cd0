package record

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/redact"
	"github.com/memgate/memgate/internal/store/sqlite"
)

var (
	_ Queue = (*sqlite.Outbox)(nil)
	_ Saver = (*sqlite.Store)(nil)
)

func mustSQLite(tb testing.TB) *sqlite.Store {
	tb.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "memgate.db"), nil)
	if err != nil {
		tb.Fatalf("open sqlite: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

func outboxPending(tb testing.TB, s *sqlite.Store) int64 {
	tb.Helper()
	n, err := s.Outbox().Pending(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

func TestSQLiteCaptureStoresEveryTurnOnce(t *testing.T) {
	store := mustSQLite(t)
	r, err := redact.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	secret := "AKIA" + "IOSFODNN7EXAMPLE"
	c := mustCapturer(t, store.Outbox(), store, r, withStore(Options{}, store))
	for i := range n {
		c.Capture(context.Background(), exchange(t, fmt.Sprintf("req-%02d", i), fmt.Sprintf("question %d %s", i, secret), fmt.Sprintf("answer %d", i)))
	}
	// Stored on the request path: nothing waits in the capture outbox.
	if got := outboxPending(t, store); got != 0 {
		t.Fatalf("outbox pending = %d, want 0", got)
	}
	msgs, err := store.Recent(context.Background(), memory.Identity{Tenant: "t1", User: "u1", Conversation: "c1"}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2*n {
		t.Fatalf("stored %d messages, want %d", len(msgs), 2*n)
	}
	for i := range n {
		q, a := msgs[2*i], msgs[2*i+1]
		if q.Role != "user" || !strings.HasPrefix(q.Content, fmt.Sprintf("question %d ", i)) || a.Content != fmt.Sprintf("answer %d", i) {
			t.Fatalf("turn %d stored as %q / %q", i, q.Content, a.Content)
		}
		if strings.Contains(q.Content, secret) || strings.Contains(string(q.Raw), secret) {
			t.Fatalf("secret reached the store: %q %s", q.Content, q.Raw)
		}
	}
	if value(t, c.metrics.saved) != n {
		t.Fatalf("saved = %v", value(t, c.metrics.saved))
	}
}

func TestSQLiteWorkerKilledBetweenSaveAndAck(t *testing.T) {
	store := mustSQLite(t)
	for i := range 3 {
		enqueue(t, store.Outbox(), exchange(t, fmt.Sprint("req-", i), fmt.Sprint("q", i), fmt.Sprint("a", i)))
	}
	crash := &crashAfterSave{Saver: store, crashed: map[string]bool{}}
	w := NewWorker(store.Outbox(), crash, nil, fastWorker())
	mustRunWorker(t, w)
	waitFor(t, "outbox drained after redelivery", func() bool { return outboxPending(t, store) == 0 })
	msgs, err := store.Recent(context.Background(), memory.Identity{Tenant: "t1", User: "u1", Conversation: "c1"}, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range msgs {
		got = append(got, m.Content)
	}
	if want := "q0 a0 q1 a1 q2 a2"; strings.Join(got, " ") != want {
		t.Fatalf("stored %q, want %q (each once)", strings.Join(got, " "), want)
	}
	if value(t, w.duplicates) != 3 {
		t.Fatalf("duplicates = %v, want 3", value(t, w.duplicates))
	}
}

// TestCaptureFirstTurnAfterItsContinuation: a full-history chat's first
// turn captured after its continuation (which stored it as resent history)
// is a duplicate: the default conversation stays empty and the chat's
// conversation holds every turn once. Captured in order, the continuation
// moves the first turn out of default instead.
func TestCaptureFirstTurnAfterItsContinuation(t *testing.T) {
	msg := func(role, text string) memory.Message {
		return memory.Message{Role: role, Content: text, Raw: []byte(fmt.Sprintf(`{"role":%q,"content":%q}`, role, text))}
	}
	def := memory.Identity{Tenant: "t1", User: "u1", Conversation: memory.DefaultConversation}
	chat := memory.Identity{Tenant: "t1", User: "u1", Conversation: "chat-0123456789abcdef0123456789abcdef"}
	first := memory.Exchange{Identity: def, Turn: []memory.Message{msg("user", "Hi")}, Reply: msg("assistant", "Hello"), Candidate: chat.Conversation}
	next := memory.Exchange{Identity: chat, Prior: []memory.Message{msg("user", "Hi"), msg("assistant", "Hello")},
		Turn: []memory.Message{msg("user", "Bye")}, Reply: msg("assistant", "Ciao"), Derived: true}
	for _, order := range []string{"continuation first", "in order"} {
		t.Run(order, func(t *testing.T) {
			store := mustSQLite(t)
			c := mustCapturer(t, store.Outbox(), store, nil, withStore(Options{}, store))
			exs := []memory.Exchange{first, next}
			if order == "continuation first" {
				exs = []memory.Exchange{next, first}
			}
			for _, ex := range exs {
				c.Capture(context.Background(), ex)
			}
			for id, want := range map[memory.Identity]string{def: "", chat: "Hi Hello Bye Ciao"} {
				msgs, err := store.Recent(context.Background(), id, 100)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, m := range msgs {
					got = append(got, m.Content)
				}
				if strings.Join(got, " ") != want {
					t.Fatalf("%s holds %q, want %q", id.Conversation, got, want)
				}
			}
		})
	}
}
