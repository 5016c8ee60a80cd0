package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/memgate/memgate/internal/memory"
)

// TestAddItemsInsertsBeforeLockingConversation holds a conversation's row
// as a save superseding a branch does, and indexes two of its turns
// meanwhile: AddItems inserts them before it waits for the conversation
// (the costly indexing then never holds up a capture of the conversation),
// and once the save supersedes one turn and commits, that turn's item is
// removed again and the other kept.
func TestAddItemsInsertsBeforeLockingConversation(t *testing.T) {
	ctx := testCtx(t)
	s := mustOpen(t)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c"}
	ex := memory.Exchange{ID: "ex1", Identity: id, At: time.Now(),
		Turn: []memory.Message{{Role: "user", Content: "I live in Porto"}}, Reply: memory.Message{Role: "assistant", Content: "Noted"}}
	if _, err := s.SaveExchange(ctx, ex); err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	rows, err := s.pool.Query(ctx, `SELECT role, key FROM messages WHERE tenant = 'acme' AND user_id = 'alice' AND conversation = 'c'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var role, key string
		if err := rows.Scan(&role, &key); err != nil {
			t.Fatal(err)
		}
		keys[role] = key
	}
	if rows.Err() != nil || len(keys) != 2 {
		t.Fatalf("stored messages %v, %v", keys, rows.Err())
	}

	blocker, blockerPID := holdInTx(t, s, `SELECT 1 FROM conversations WHERE tenant = 'acme' AND user_id = 'alice' AND id = 'c' FOR UPDATE`)

	done := make(chan error, 1)
	go func() {
		done <- s.AddItems(ctx, []memory.Item{
			{Tenant: "acme", User: "alice", Conversation: "c", Kind: "message", Ref: keys["user"], Text: "I live in Porto"},
			{Tenant: "acme", User: "alice", Conversation: "c", Kind: "message", Ref: keys["assistant"], Text: "Noted"},
		})
	}()
	// Wait for AddItems to queue behind the held conversation.
	waiter := waitForLockWaiters(t, s, blockerPID, 1)[0]
	var inserted bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks
		WHERE pid = $1 AND relation = 'memory_items'::regclass AND mode = 'RowExclusiveLock' AND granted)`, waiter).Scan(&inserted); err != nil {
		t.Fatal(err)
	}
	if !inserted {
		t.Error("AddItems waited for the conversation before inserting its items")
	}
	if _, err := blocker.Exec(ctx, `UPDATE messages SET superseded_at = now()
		WHERE tenant = 'acme' AND user_id = 'alice' AND conversation = 'c' AND key = $1`, keys["user"]); err != nil {
		t.Fatal(err)
	}
	if err := blocker.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("AddItems: %v", err)
	}
	got := map[string]bool{}
	rows, err = s.pool.Query(ctx, `SELECT source FROM memory_items WHERE tenant = 'acme' AND user_id = 'alice'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var src string
		if err := rows.Scan(&src); err != nil {
			t.Fatal(err)
		}
		got[src] = true
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if got[keys["user"]] || !got[keys["assistant"]] || len(got) != 1 {
		t.Errorf("items stored for %v; want only the reply %s (the user turn %s was superseded)", got, keys["assistant"], keys["user"])
	}
}

// holdInTx begins a transaction, runs sql in it (a statement that takes
// the locks a test queues others behind) and returns it with its backend
// pid, for waitForLockWaiters; it is rolled back when the test ends unless
// committed before.
func holdInTx(t *testing.T, s *Store, sql string, args ...any) (pgx.Tx, int32) {
	t.Helper()
	ctx := testCtx(t)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	var pid int32
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		t.Fatal(err)
	}
	return tx, pid
}

// waitForLockWaiters polls until at least n sessions of the test's
// database other than notPID wait for a lock, and returns their pids: a
// test that queues statements behind a lock it holds goes on once they
// are queued, whatever the machine's speed (it fails after 20 s).
func waitForLockWaiters(t *testing.T, s *Store, notPID int32, n int) []int32 {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		rows, err := s.pool.Query(testCtx(t), `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> $1`, notPID)
		if err != nil {
			t.Fatal(err)
		}
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			t.Fatal(err)
		}
		if len(pids) >= n {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sessions wait for a lock after 20s, want %d", len(pids), n)
		}
	}
}
