package postgres

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
	"github.com/memgate/memgate/internal/store/storetest"
	"github.com/memgate/memgate/internal/testenv"
)

// TestTombstoneDigestsMatchGo: migration 0027's SQL digests are
// contract's, byte for byte, for ids of every kind (multibyte, empty,
// ones whose concatenations coincide).
func TestTombstoneDigestsMatchGo(t *testing.T) {
	s := mustOpen(t)
	for _, id := range []memory.Identity{
		{Tenant: "acme", User: "erase-me-7f3a@example.com", Conversation: "c1"},
		{Tenant: "default", User: "zoë", Conversation: "日本"},
		{Tenant: "", User: "", Conversation: ""},
		{Tenant: "ab", User: "c", Conversation: "d"},
		{Tenant: "a", User: "bc", Conversation: "d"},
	} {
		var user, conv []byte
		if err := s.pool.QueryRow(testCtx(t), `SELECT memgate_user_tombstone($1, $2), memgate_conversation_tombstone($1, $2, $3)`,
			id.Tenant, id.User, id.Conversation).Scan(&user, &conv); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(user, contract.UserTombstone(id.Tenant, id.User)) {
			t.Errorf("%+v: user digest in SQL %x, in Go %x", id, user, contract.UserTombstone(id.Tenant, id.User))
		}
		if !bytes.Equal(conv, contract.ConversationTombstone(id)) {
			t.Errorf("%+v: conversation digest in SQL %x, in Go %x", id, conv, contract.ConversationTombstone(id))
		}
	}
	if bytes.Equal(contract.UserTombstone("ab", "c"), contract.UserTombstone("a", "bc")) {
		t.Error("two identities share a digest")
	}
}

// TestTombstonesOfEarlierBuildsAreDigested: a database whose tombstones
// an earlier build wrote with the ids in the clear (erasures,
// conversation_deletions), and whose erased user's revision counters it
// kept under the id, is migrated: the tombstones still refuse what they
// refused, the counters read the same, and neither id is left in any
// table.
func TestTombstonesOfEarlierBuildsAreDigested(t *testing.T) {
	ctx := testCtx(t)
	url := testenv.PostgresURL(t)
	conn := migrateBefore(t, url, 27)
	const erased, conv = "old-erased-7f3a@example.com", "old-conv-4d2e@example.com"
	victim := memory.Identity{Tenant: "acme", User: erased, Conversation: "c1"}
	gone := memory.Identity{Tenant: "acme", User: "bob", Conversation: conv}
	at := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
	for _, q := range []string{
		`INSERT INTO erasures (tenant, user_id, erased_at) VALUES ('acme', '` + erased + `', $1)`,
		`INSERT INTO conversation_deletions (tenant, user_id, conversation, deleted_at) VALUES ('acme', 'bob', '` + conv + `', $1)`,
		`INSERT INTO memory_item_revisions (tenant, user_id, added, changed, dated, messages_changed, messages_added,
			facts_changed, summaries_changed) SELECT 'acme', '` + erased + `', 3, 4, 5, 6, 7, 8, 9 WHERE $1::timestamptz IS NOT NULL`,
	} {
		if _, err := conn.Exec(ctx, q, at); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	s := mustOpenURL(t, url) // migrates
	for _, id := range []string{erased, conv} {
		if where, err := atRest(ctx, s, id); err != nil || len(where) > 0 {
			t.Fatalf("%q after the migration: in %v, %v; want nowhere", id, where, err)
		}
	}
	if got, err := s.ErasedAt(ctx, victim.Tenant, victim.User); err != nil || !got.Equal(at) {
		t.Fatalf("ErasedAt after the migration = %v, %v; want %v", got, err, at)
	}
	if got, err := s.DeletedAt(ctx, gone); err != nil || !got.Equal(at) {
		t.Fatalf("DeletedAt after the migration = %v, %v; want %v", got, err, at)
	}
	want := memory.Revisions{Added: 3, Changed: 4, Dated: 5, Messages: 6, MessagesAdded: 7, Facts: 8, Summaries: 9}
	if got, err := s.ItemRevisions(ctx, victim.Tenant, victim.User); err != nil || got != want {
		t.Fatalf("revisions after the migration = %+v, %v; want %+v", got, err, want)
	}
	late := at.Add(-time.Millisecond)
	for _, id := range []memory.Identity{victim, gone} {
		res, err := s.SaveExchange(ctx, memory.Exchange{ID: "late-" + id.User, Identity: id, At: late, Received: late,
			Turn: []memory.Message{{Role: "user", Content: "late"}}, Reply: memory.Message{Role: "assistant", Content: "ok"}})
		if err != nil || !res.Dropped {
			t.Fatalf("%s: turn received before the tombstone = %+v, %v; want Dropped", id.User, res, err)
		}
	}
}

func TestTombstoneExpiryContract(t *testing.T) {
	storetest.RunTombstoneExpiry(t, func(t *testing.T) (storetest.TombstoneStore, storetest.Tombstones) {
		s := mustOpen(t)
		return s, storetest.Tombstones{
			Age: func(ctx context.Context, by time.Duration) error {
				_, err := s.pool.Exec(ctx, `UPDATE conversation_tombstones SET deleted_at = deleted_at - make_interval(secs => $1)`, by.Seconds())
				return err
			},
			Count: func(ctx context.Context) (n int, err error) {
				return n, s.pool.QueryRow(ctx, `SELECT COUNT(*) FROM conversation_tombstones`).Scan(&n)
			},
		}
	})
}

func TestPendingPurgesContract(t *testing.T) {
	storetest.RunPendingPurges(t, func(t *testing.T) storetest.PurgeLedger { return mustOpen(t) })
	storetest.RunErasurePurges(t, func(t *testing.T) storetest.ErasingLedger { return mustOpen(t) })
}
