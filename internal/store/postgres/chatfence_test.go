package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/testenv"
)

// TestChatLockWaitsForWritesPastTheFence: a write under a chat's lock
// checks the hold at its transaction's start (fenceChats), not at its
// commit. When the holder's lock connection breaks between the two,
// another holder may take the chat, but not before that write ended:
// else it would read the chat without it (storedAhead, Adopt), and the
// write, committed after, would store the chat's first turn a second
// time. Once the write ends, the other holder has the chat.
func TestChatLockWaitsForWritesPastTheFence(t *testing.T) {
	url := testenv.PostgresURL(t)
	a, b := mustOpenURL(t, url), mustOpenURL(t, url)
	ctx := testCtx(t)
	chats := []memory.Identity{{Tenant: "acme", User: fmt.Sprint("u-fence-", time.Now().UnixNano()), Conversation: "chat-fence"}}
	fence, unlock, err := a.LockChats(ctx, chats)
	if err != nil {
		t.Fatalf("LockChats: %v", err)
	}
	defer unlock()
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := a.fenceChats(ctx, tx, fence, chats...); err != nil {
		t.Fatalf("a write under a held lock was refused: %v", err)
	}
	terminateChatLocks(t, a, b, chats)
	took := takeAfterLoss(t, b, chats)
	waitForFence(t, b, chats, took)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-took; err != nil {
		t.Fatalf("once the write ended, the other holder could not take the chat: %v", err)
	}
}

// TestChatLockWaitsForSavesPastTheFence: as
// TestChatLockWaitsForWritesPastTheFence, for a save (SaveExchanges): its
// check of the hold is in its first round trip, its commit in its second.
// Here the save waits, past its check, for a row another transaction is
// inserting; the holder's lock connection breaks meanwhile. Another
// holder takes the chat only once the save committed.
func TestChatLockWaitsForSavesPastTheFence(t *testing.T) {
	url := testenv.PostgresURL(t)
	a, b := mustOpenURL(t, url), mustOpenURL(t, url)
	ctx := testCtx(t)
	id := memory.Identity{Tenant: "acme", User: fmt.Sprint("u-fence-", time.Now().UnixNano()), Conversation: "chat-fence"}
	chats := []memory.Identity{id}
	first := memory.Exchange{ID: "ex-0", Identity: id, At: time.Now(),
		Turn: []memory.Message{{Role: "user", Content: "hi"}}, Reply: memory.Message{Role: "assistant", Content: "hello"}}
	if _, err := a.SaveExchange(ctx, first); err != nil {
		t.Fatal(err)
	}
	fence, unlock, err := a.LockChats(ctx, chats)
	if err != nil {
		t.Fatalf("LockChats: %v", err)
	}
	defer unlock()
	// The row the save's first message will take (seq 3), inserted and
	// not committed: the save waits for it after its check.
	blocker, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = blocker.Rollback(ctx) }()
	// Without its triggers: the count's (migration 0037) would lock the
	// conversation row, and the save would wait for it before its check.
	// A writer of memgate's that inserts messages holds that row already.
	if _, err := blocker.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
		t.Fatal(err)
	}
	if _, err := blocker.Exec(ctx, `INSERT INTO messages (tenant, user_id, conversation, seq, key, role, content, created_at)
		VALUES ($1, $2, $3, 3, $4, 'user', 'x', now())`, id.Tenant, id.User, id.Conversation, fmt.Sprint("blocker-", time.Now().UnixNano())); err != nil {
		t.Fatal(err)
	}
	var blockerPID int32
	if err := blocker.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&blockerPID); err != nil {
		t.Fatal(err)
	}
	saved := make(chan error, 1)
	go func() {
		_, err := a.SaveExchange(ctx, memory.Exchange{ID: "ex-1", Identity: id, At: time.Now(), Derived: true, Fence: fence,
			Prior: []memory.Message{first.Turn[0], first.Reply},
			Turn:  []memory.Message{{Role: "user", Content: "again"}}, Reply: memory.Message{Role: "assistant", Content: "sure"}})
		saved <- err
	}()
	// The save waits for the blocker's row.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var waiting int
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks w JOIN pg_locks h ON h.locktype = 'transactionid'
			AND h.transactionid = w.transactionid AND h.granted AND h.pid = $1
			WHERE w.locktype = 'transactionid' AND NOT w.granted`, blockerPID).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		select {
		case err := <-saved:
			t.Fatalf("the save ended (%v) without waiting for the blocker's row", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the save does not wait for the blocker's row")
		}
	}
	terminateChatLocks(t, a, b, chats)
	took := takeAfterLoss(t, b, chats)
	waitForFence(t, b, chats, took)
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-saved; err != nil {
		t.Fatalf("the save past its check: %v", err)
	}
	if err := <-took; err != nil {
		t.Fatalf("once the save ended, the other holder could not take the chat: %v", err)
	}
}

// takeAfterLoss waits until the terminated lock connection's lock of
// chats is gone, then has b take them, and returns what that take
// reports when it ends (b's hold released at once).
func takeAfterLoss(t *testing.T, b *Store, chats []memory.Identity) <-chan error {
	t.Helper()
	ctx, key := testCtx(t), chatLockKeys(chats)[0]
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var held int
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = $1::int4::oid
			AND objid = $2::int4::oid AND objsubid = 2`, chatLockClass, key).Scan(&held); err != nil {
			t.Fatal(err)
		}
		if held == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the terminated lock connection still holds the chat")
		}
	}
	took := make(chan error, 1)
	go func() {
		_, unlock, err := b.LockChats(ctx, chats)
		if err == nil {
			unlock()
		}
		took <- err
	}()
	return took
}

// waitForFence waits until b's take of chats (took) waits for a write
// still open under the lost hold (an advisory lock of the chat's key other
// than the chat lock, not granted); it fails the test when the take ends
// first.
func waitForFence(t *testing.T, b *Store, chats []memory.Identity, took <-chan error) {
	t.Helper()
	ctx, key := testCtx(t), chatLockKeys(chats)[0]
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-took:
			t.Fatalf("another holder took the chat (%v) while a write that passed its fence check was still open", err)
		default:
		}
		var waiting int
		if err := b.pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid <> $1::int4::oid
			AND objid = $2::int4::oid AND objsubid = 2 AND NOT granted`, chatLockClass, key).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the other holder neither took the chat nor waits for the write")
		}
	}
}
