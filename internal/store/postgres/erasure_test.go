package postgres

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/storetest"
)

// vacuumCounts reads how often each table erasures touch was vacuumed by
// hand (pg_stat_user_tables.vacuum_count).
func vacuumCounts(t *testing.T, s *Store) map[string]int64 {
	t.Helper()
	rows, err := s.pool.Query(context.Background(),
		`SELECT relname, vacuum_count FROM pg_stat_user_tables WHERE relname = ANY($1)`, erasedTables)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		out[name] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDeleteUserVacuumsInTheBackground checks that an erasure returns before
// any VACUUM and that one then runs on every table that held the user's rows.
func TestDeleteUserVacuumsInTheBackground(t *testing.T) {
	s := mustOpen(t)
	ctx := testCtx(t)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	ex := memory.Exchange{ID: "ex1", Identity: id, At: time.Now().Add(-time.Minute),
		Turn:  []memory.Message{{Role: "user", Content: "I live in Porto"}},
		Reply: memory.Message{Role: "assistant", Content: "Noted"}}
	if _, err := s.SaveExchange(ctx, ex); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertFact(ctx, memory.Fact{Tenant: "acme", User: "alice", Type: memory.FactProfile, Key: "city", Value: "Porto", Confidence: 1}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.HoldResponse(ctx, memory.HeldResponse{Identity: id, ID: "resp_1", Exchange: []byte("x"),
		At: time.Now(), Expires: time.Now().Add(memory.HeldTTL), Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"messages", "facts", "held_responses"} { // the tables the user's rows are in
		if !slices.Contains(erasedTables, table) {
			t.Errorf("%s, which held the user's rows, is not vacuumed after the erasure", table)
		}
	}
	before := vacuumCounts(t, s)
	if len(before) != len(erasedTables) {
		t.Fatalf("tables found = %v, want %v", before, erasedTables)
	}
	if err := s.DeleteUser(ctx, "acme", "alice"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		after := vacuumCounts(t, s)
		var waiting []string
		for _, table := range erasedTables {
			if after[table] <= before[table] {
				waiting = append(waiting, table)
			}
		}
		if len(waiting) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no VACUUM after the erasure on %v", waiting)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BenchmarkDeleteUserLongestWait: storetest.BenchEraseWhileCapturing.
func BenchmarkDeleteUserLongestWait(b *testing.B) {
	storetest.BenchEraseWhileCapturing(b, func(b *testing.B) storetest.EraseBenchStore { return mustOpen(b) })
}
