package sqlite_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestTombstonesOfEarlierBuildsAreDigested: a file whose tombstones an
// earlier build wrote with the ids in the clear (erasures,
// conversation_deletions), and whose erased user's revision counters it
// kept under the id, is opened: the tombstones still refuse what they
// refused (ErasedAt, DeletedAt, a late turn dropped), the counters read
// the same, and neither id is left in the file or its WAL.
func TestTombstonesOfEarlierBuildsAreDigested(t *testing.T) {
	ctx := context.Background()
	s, path := mustTempStore(t)
	const erased, conv = "old-erased-7f3a@example.com", "old-conv-4d2e@example.com"
	victim := memory.Identity{Tenant: "acme", User: erased, Conversation: "c1"}
	gone := memory.Identity{Tenant: "acme", User: "bob", Conversation: conv}
	for _, id := range []memory.Identity{victim, gone} {
		ex := memory.Exchange{ID: "ex-" + id.User, Identity: id, At: time.Now().Add(-time.Minute),
			Turn: []memory.Message{{Role: "user", Content: "hello"}}, Reply: memory.Message{Role: "assistant", Content: "hi"}}
		if _, err := s.SaveExchange(ctx, ex); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddItems(ctx, []memory.Item{{Tenant: victim.Tenant, User: victim.User, Conversation: victim.Conversation,
		Kind: "message", Ref: memory.Key("ex-"+erased, 0), Text: "hello", Embedding: []float32{1, 0}, Model: "m", Dims: 2}}); err != nil {
		t.Fatal(err)
	}
	// What an earlier build's erasure and deletion left: the rows gone,
	// the counters kept under the id, tombstones keyed by the ids.
	db := mustRawDB(t, path)
	db.SetMaxOpenConns(1) // one connection, deleting securely as the store does
	erasedAt := time.Now().Add(-time.Second).UnixNano()
	for _, q := range []string{
		`PRAGMA secure_delete = ON`,
		`DELETE FROM memory_items WHERE user_id = '` + erased + `'`,
		`DELETE FROM messages WHERE user_id = '` + erased + `' OR conversation = '` + conv + `'`,
		`DELETE FROM exchanges WHERE user_id = '` + erased + `' OR conversation = '` + conv + `'`,
		`DELETE FROM conversations WHERE user_id = '` + erased + `' OR id = '` + conv + `'`,
		`CREATE TABLE erasures (tenant TEXT NOT NULL, user_id TEXT NOT NULL, erased_at INTEGER NOT NULL, PRIMARY KEY (tenant, user_id))`,
		`CREATE TABLE conversation_deletions (tenant TEXT NOT NULL, user_id TEXT NOT NULL, conversation TEXT NOT NULL,
			deleted_at INTEGER NOT NULL, PRIMARY KEY (tenant, user_id, conversation)) WITHOUT ROWID`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO erasures VALUES ('acme', ?, ?)`, erased, erasedAt); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO conversation_deletions VALUES ('acme', 'bob', ?, ?)`, conv, erasedAt); err != nil {
		t.Fatal(err)
	}
	before, err := s.ItemRevisions(ctx, victim.Tenant, victim.User)
	if err != nil || before.Added == 0 || before.Messages == 0 || before.MessagesAdded == 0 {
		t.Fatalf("revisions before the upgrade = %+v, %v; want the writes counted", before, err)
	}
	if raw := fileBytes(t, path); !bytes.Contains(raw, []byte(erased)) || !bytes.Contains(raw, []byte(conv)) {
		t.Fatal("the ids are not on disk before the upgrade: the test cannot see what it checks")
	}

	up := mustOpen(t, path) // migrates
	if raw := fileBytes(t, path); bytes.Contains(raw, []byte(erased)) || bytes.Contains(raw, []byte(conv)) {
		t.Fatalf("an id is still on disk after the upgrade (erased user: %v, deleted conversation: %v)",
			bytes.Contains(raw, []byte(erased)), bytes.Contains(raw, []byte(conv)))
	}
	if at, err := up.ErasedAt(ctx, victim.Tenant, victim.User); err != nil || at.UnixNano() != erasedAt {
		t.Fatalf("ErasedAt after the upgrade = %v, %v; want %v", at, err, time.Unix(0, erasedAt))
	}
	if at, err := up.DeletedAt(ctx, gone); err != nil || at.UnixNano() != erasedAt {
		t.Fatalf("DeletedAt after the upgrade = %v, %v; want %v", at, err, time.Unix(0, erasedAt))
	}
	if after, err := up.ItemRevisions(ctx, victim.Tenant, victim.User); err != nil || after != before {
		t.Fatalf("revisions after the upgrade = %+v, %v; want %+v", after, err, before)
	}
	late := time.Unix(0, erasedAt).Add(-time.Millisecond)
	for _, id := range []memory.Identity{victim, gone} {
		res, err := up.SaveExchange(ctx, memory.Exchange{ID: "late-" + id.User, Identity: id, At: late, Received: late,
			Turn: []memory.Message{{Role: "user", Content: "late"}}, Reply: memory.Message{Role: "assistant", Content: "ok"}})
		if err != nil || !res.Dropped {
			t.Fatalf("%s: turn received before the tombstone = %+v, %v; want Dropped", id.User, res, err)
		}
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE name IN ('erasures', 'conversation_deletions')`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("tables of the ids left: %d, %v", n, err)
	}
	mustOpen(t, path) // and a later open finds nothing to move
}
