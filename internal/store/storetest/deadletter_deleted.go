package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// testDeadLetterOfDeletedConversation: a dead letter set aside after its
// conversation was deleted, of an exchange received (Received; when zero,
// said: At) at or before the deletion — a turn in flight during the
// deletion that the store then refused — is not written, so the deleted
// conversation's text does not stay at rest; the deletion counts again
// once re-dated by a second DeleteConversation. A dead letter of an
// exchange received after the deletion, or of another conversation, is
// written.
func testDeadLetterOfDeletedConversation(t *testing.T, s CaptureStore) {
	ctx := testCtx(t)
	c1 := memory.Identity{Tenant: "t1", User: "alice", Conversation: "c1"}
	c2 := c1
	c2.Conversation = "c2"
	start := time.Now().Add(-time.Minute)
	first := exchange(c1, "ex-first", 0, nil, []memory.Message{msg(t, "user", "q")}, msg(t, "assistant", "a"))
	first.Received, first.At = start, start
	if _, err := s.SaveExchange(ctx, first); err != nil {
		t.Fatal(err)
	}
	letter := func(id memory.Identity, ex string, received, at time.Time) memory.DeadLetter {
		return memory.DeadLetter{Exchange: ex, Identity: id, Reason: "refused", Payload: []byte(`{"turn":"secret"}`), At: at, Received: received}
	}
	write := func(d memory.DeadLetter) {
		t.Helper()
		if err := s.DeadLetter(ctx, d); err != nil {
			t.Fatalf("DeadLetter %s: %v", d.Exchange, err)
		}
	}
	written := func(want ...string) {
		t.Helper()
		got, err := s.DeadLetters(ctx, c1.Tenant)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range got {
			ids = append(ids, d.Conversation+"/"+d.Exchange)
		}
		if len(ids) != len(want) {
			t.Fatalf("dead letters %v, want %v", ids, want)
		}
		for i := range want {
			if ids[i] != want[i] {
				t.Fatalf("dead letters %v, want %v", ids, want)
			}
		}
	}

	inflight := time.Now()
	if err := s.DeleteConversation(ctx, c1); err != nil {
		t.Fatal(err)
	}
	write(letter(c1, "in-flight", inflight, inflight))
	write(letter(c1, "undated", time.Time{}, start)) // queued without Received, said before
	write(letter(c2, "other", inflight, inflight))
	written("c2/other")

	between := time.Now()
	if err := s.DeleteConversation(ctx, c1); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("second DeleteConversation = %v, want memory.ErrNotFound", err)
	}
	write(letter(c1, "in-flight-2", between, between))
	written("c2/other")

	after := time.Now().Add(time.Second)
	write(letter(c1, "fresh", after, start)) // received after the deletion: an import of old turns
	written("c2/other", "c1/fresh")
}

// testDeadLetterOfUnstoredConversation: a conversation whose only turn
// became a dead letter before it was ever stored (the store refused it,
// or it was neither stored nor queued in time: record's Options.RetryFor)
// has nothing stored but that letter, and deleting it — answered
// memory.ErrNotFound — deletes the letter too: the turn's text does not
// outlive the deletion. Another conversation's letter stays.
func testDeadLetterOfUnstoredConversation(t *testing.T, s CaptureStore) {
	ctx := testCtx(t)
	c1 := memory.Identity{Tenant: "t1", User: "alice", Conversation: "never-stored"}
	c2 := c1
	c2.Conversation = "other"
	said := time.Now().Add(-time.Minute)
	for _, id := range []memory.Identity{c1, c2} {
		d := memory.DeadLetter{Exchange: "ex-" + id.Conversation, Identity: id, Reason: "expired",
			Payload: []byte(`{"turn":"secret"}`), At: said, Received: said}
		if err := s.DeadLetter(ctx, d); err != nil {
			t.Fatalf("DeadLetter %s: %v", d.Exchange, err)
		}
	}
	if err := s.DeleteConversation(ctx, c1); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("DeleteConversation of a conversation never stored = %v, want memory.ErrNotFound", err)
	}
	got, err := s.DeadLetters(ctx, c1.Tenant)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Conversation != c2.Conversation {
		t.Fatalf("dead letters after deleting %s = %+v, want %s's alone", c1.Conversation, got, c2.Conversation)
	}
}
