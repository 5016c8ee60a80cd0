package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// seedDerived stores an exchange for id and adds the rows later issues
// derive from it — a summary, a fact, a memory item with an embedding — so
// erasure can be checked against all of them.
func seedDerived(tb testing.TB, save func(memory.Exchange) error, db *sql.DB, id memory.Identity, word string) {
	tb.Helper()
	ex := memory.Exchange{ID: "seed-" + word, Identity: id, At: time.Now().Add(-time.Minute),
		Turn:  []memory.Message{{Role: "user", Content: "I like " + word}},
		Reply: memory.Message{Role: "assistant", Content: "Noted"}}
	if err := save(ex); err != nil {
		tb.Fatalf("SaveExchange: %v", err)
	}
	now := time.Now().UnixNano()
	stmts := []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO summaries (tenant, user_id, conversation, version, from_seq, to_seq, content, created_at)
			VALUES (?, ?, ?, 1, 1, 2, ?, ?)`, []any{id.Tenant, id.User, id.Conversation, "likes " + word, now}},
		{`INSERT INTO facts (tenant, user_id, conversation, type, key, norm_key, value, created_at, updated_at)
			VALUES (?, ?, ?, 'preference', ?, ?, ?, ?, ?)`, []any{id.Tenant, id.User, id.Conversation, "likes " + word, "likes " + word, word, now, now}},
		{`INSERT INTO memory_items (tenant, user_id, conversation, kind, source, text, embedding, model, dims, created_at)
			VALUES (?, ?, ?, 'turn', ?, ?, ?, 'local', 2, ?)`,
			[]any{id.Tenant, id.User, id.Conversation, "seed-" + word + ":0", "I like " + word, []byte{0, 0, 128, 63, 0, 0, 0, 0}, now}},
	}
	for _, st := range stmts {
		if _, err := db.Exec(st.sql, st.args...); err != nil {
			tb.Fatalf("seed: %v", err)
		}
	}
}

// countRows reports how many rows of each derived table belong to the user,
// and how many FTS matches word has among them.
func countRows(tb testing.TB, db *sql.DB, tenant, user, word string) map[string]int {
	tb.Helper()
	out := map[string]int{}
	for _, table := range []string{"conversations", "messages", "exchanges", "summaries", "facts", "memory_items"} {
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM `+table+` WHERE tenant = ? AND user_id = ?`, tenant, user).Scan(&n); err != nil {
			tb.Fatalf("count %s: %v", table, err)
		}
		out[table] = n
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM memory_items_fts f JOIN memory_items m ON m.id = f.rowid
		WHERE memory_items_fts MATCH ? AND m.tenant = ? AND m.user_id = ?`, word, tenant, user).Scan(&n); err != nil {
		tb.Fatalf("fts search: %v", err)
	}
	out["fts"] = n
	var orphans int
	if err := db.QueryRow(`SELECT COUNT(*) FROM memory_items_fts WHERE memory_items_fts MATCH ?`, word).Scan(&orphans); err != nil {
		tb.Fatalf("fts search: %v", err)
	}
	out["fts_all"] = orphans
	return out
}

func TestDeleteUserErasesDerivedMemory(t *testing.T) {
	s, path := mustTempStore(t)
	db := mustRawDB(t, path)
	save := func(ex memory.Exchange) error { _, err := s.SaveExchange(context.Background(), ex); return err }
	victim := memory.Identity{Tenant: "tenant-a", User: "alice", Conversation: "c1"}
	bystander := memory.Identity{Tenant: "tenant-b", User: "alice", Conversation: "c1"}
	seedDerived(t, save, db, victim, "olives")
	seedDerived(t, save, db, bystander, "capers")

	full := map[string]int{"conversations": 1, "messages": 2, "exchanges": 1, "summaries": 1, "facts": 1, "memory_items": 1, "fts": 1, "fts_all": 1}
	if got := countRows(t, db, "tenant-a", "alice", "olives"); fmt.Sprint(got) != fmt.Sprint(full) {
		t.Fatalf("seeded victim rows = %v, want %v", got, full)
	}
	if err := s.DeleteUser(context.Background(), "tenant-a", "alice"); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	empty := map[string]int{"conversations": 0, "messages": 0, "exchanges": 0, "summaries": 0, "facts": 0, "memory_items": 0, "fts": 0, "fts_all": 0}
	if got := countRows(t, db, "tenant-a", "alice", "olives"); fmt.Sprint(got) != fmt.Sprint(empty) {
		t.Fatalf("after DeleteUser victim rows = %v, want %v", got, empty)
	}
	if got := countRows(t, db, "tenant-b", "alice", "capers"); fmt.Sprint(got) != fmt.Sprint(full) {
		t.Fatalf("other tenant's rows = %v, want %v", got, full)
	}
	var erased int64
	if err := db.QueryRow(`SELECT erased_at FROM user_tombstones WHERE digest = ?`,
		contract.UserTombstone("tenant-a", "alice")).Scan(&erased); err != nil || erased == 0 {
		t.Fatalf("erasure not recorded: %d, %v", erased, err)
	}
}

func TestDeleteConversationRemovesItsMemoryItems(t *testing.T) {
	s, path := mustTempStore(t)
	db := mustRawDB(t, path)
	save := func(ex memory.Exchange) error { _, err := s.SaveExchange(context.Background(), ex); return err }
	gone := memory.Identity{Tenant: "acme", User: "alice", Conversation: "gone"}
	kept := memory.Identity{Tenant: "acme", User: "alice", Conversation: "kept"}
	seedDerived(t, save, db, gone, "olives")
	seedDerived(t, save, db, kept, "capers")

	if err := s.DeleteConversation(context.Background(), gone); err != nil {
		t.Fatalf("DeleteConversation: %v", err)
	}
	tests := []struct {
		word string
		want map[string]int
	}{
		// Facts are about the user, not the conversation: both stay.
		{"olives", map[string]int{"conversations": 1, "messages": 2, "exchanges": 1, "summaries": 1, "facts": 2, "memory_items": 1, "fts": 0, "fts_all": 0}},
		{"capers", map[string]int{"conversations": 1, "messages": 2, "exchanges": 1, "summaries": 1, "facts": 2, "memory_items": 1, "fts": 1, "fts_all": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.word, func(t *testing.T) {
			if got := countRows(t, db, "acme", "alice", tt.word); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("rows = %v, want %v", got, tt.want)
			}
		})
	}
}
