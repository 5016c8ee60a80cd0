package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// TestSaveRunsPreparedWrites checks that an opened Store holds every
// statement of capture's save prepared on its writer, and that saves
// through them store what they should, in order, and refuse an erased user.
func TestSaveRunsPreparedWrites(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "m.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for _, q := range hotWrites {
		if st, _ := s.writes.stmt(context.Background(), q, false); st == nil {
			t.Errorf("not prepared: %.60s", q)
		}
	}
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	for i, text := range []string{"first", "second", "third"} {
		ex := memory.Exchange{ID: "ex-" + text, Identity: id, Turn: []memory.Message{{Role: "user", Content: text}},
			Reply: memory.Message{Role: "assistant", Content: "re " + text}}
		res, err := s.SaveExchange(ctx, ex)
		if err != nil || res.Inserted != 2 {
			t.Fatalf("save %d: %+v, %v", i, res, err)
		}
		if res, err := s.SaveExchange(ctx, ex); err != nil || !res.Duplicate {
			t.Fatalf("save %d again: %+v, %v, want a duplicate", i, res, err)
		}
	}
	msgs, err := s.Recent(ctx, id, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"first", "re first", "second", "re second", "third", "re third"}
	if len(msgs) != len(want) {
		t.Fatalf("%d messages, want %d", len(msgs), len(want))
	}
	for i, m := range msgs {
		if m.Content != want[i] || m.Seq != int64(i+1) {
			t.Errorf("message %d: seq %d %q, want seq %d %q", i, m.Seq, m.Content, i+1, want[i])
		}
	}
	if err := s.DeleteUser(ctx, "acme", "alice"); err != nil {
		t.Fatal(err)
	}
	res, err := s.SaveExchange(ctx, memory.Exchange{ID: "ex-late", Identity: id, At: msgs[0].CreatedAt,
		Turn: []memory.Message{{Role: "user", Content: "late"}}, Reply: memory.Message{Role: "assistant", Content: "re late"}})
	if err != nil || !res.Dropped {
		t.Fatalf("save dated before the erasure: %+v, %v, want dropped", res, err)
	}
}
