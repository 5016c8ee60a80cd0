package postgres

import (
	"fmt"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// TestBulkWritesCountOnce checks migration 0024 (counted.go): a group
// commit that stores a long history, and an erasure of it with its items,
// move the user's counters by every row, as the row triggers would, but
// write the counter row a few times, not once per row (each write of one
// row in a transaction walks all its earlier versions: quadratic). A
// trigger of the test's own logs every write of the row.
func TestBulkWritesCountOnce(t *testing.T) {
	s := mustOpen(t)
	ctx := testCtx(t)
	const n = 1_000
	for _, q := range []string{
		`CREATE TABLE revision_writes (at timestamptz NOT NULL DEFAULT clock_timestamp())`,
		`CREATE FUNCTION log_revision_write() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO revision_writes DEFAULT VALUES; RETURN NEW; END $$`,
		`CREATE TRIGGER log_revision_write BEFORE INSERT OR UPDATE ON memory_item_revisions
			FOR EACH ROW EXECUTE FUNCTION log_revision_write()`,
	} {
		if _, err := s.pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	type counters struct{ added, messages, changed, writes int64 }
	read := func() counters {
		t.Helper()
		var c counters
		rev, err := s.ItemRevisions(ctx, "acme", "alice") // an erasure moves the row into the tombstone
		if err != nil {
			t.Fatal(err)
		}
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM revision_writes`).Scan(&c.writes); err != nil {
			t.Fatal(err)
		}
		c.added, c.messages, c.changed = rev.MessagesAdded, rev.Messages, rev.Changed
		return c
	}
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "long"}
	prior := make([]memory.Message, n-2)
	for i := range prior {
		prior[i] = memory.Message{Role: []string{"user", "assistant"}[i%2], Content: fmt.Sprint("message ", i)}
	}
	ex := memory.Exchange{ID: "ex-long", Identity: id, Prior: prior,
		Turn: []memory.Message{{Role: "user", Content: "and now?"}}, Reply: memory.Message{Role: "assistant", Content: "ok"}}
	res, err := s.SaveExchange(ctx, ex)
	if err != nil || res.Inserted != n {
		t.Fatalf("SaveExchange = %+v, %v; want %d inserted", res, err, n)
	}
	saved := read()
	if saved.added != n || saved.writes > 3 {
		t.Fatalf("after the save: messages_added %d in %d writes, want %d in a few", saved.added, saved.writes, n)
	}
	items := make([]memory.Item, n)
	for i, m := range res.Stored {
		items[i] = memory.Item{Tenant: id.Tenant, User: id.User, Conversation: id.Conversation, Kind: "message", Ref: m.Key, Text: m.Content}
	}
	if err := s.AddItems(ctx, items); err != nil {
		t.Fatal(err)
	}
	before := read()
	if err := s.DeleteUser(ctx, "acme", "alice"); err != nil {
		t.Fatal(err)
	}
	erased := read()
	if erased.messages != before.messages+n || erased.changed != before.changed+n || erased.writes-before.writes > 3 {
		t.Fatalf("after the erasure: messages_changed %d → %d, changed %d → %d, in %d writes; want both moved by %d in a few",
			before.messages, erased.messages, before.changed, erased.changed, erased.writes-before.writes, n)
	}
}
