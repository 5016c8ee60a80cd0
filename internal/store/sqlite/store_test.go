package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/store/storetest"
)

var (
	_ storetest.Store = (*sqlite.Store)(nil)
	_ storetest.Queue = (*sqlite.Outbox)(nil)
)

// mustOpen opens a store on path and closes it when the test ends.
func mustOpen(tb testing.TB, path string) *sqlite.Store {
	tb.Helper()
	s, err := sqlite.Open(context.Background(), path, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatalf("Open(%s): %v", path, err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

// mustTempStore opens a store on a fresh file in the test's temp dir.
func mustTempStore(tb testing.TB) (*sqlite.Store, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "nested", "dir", "memgate.db")
	return mustOpen(tb, path), path
}

// mustRawDB opens a second, plain connection to the store's file for
// inspecting and seeding tables the contract does not expose.
func mustRawDB(tb testing.TB, path string) *sql.DB {
	tb.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_busy_timeout=10000")
	if err != nil {
		tb.Fatalf("open raw db: %v", err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

func TestStoreContract(t *testing.T) {
	storetest.RunStore(t, func(t *testing.T) storetest.Store {
		s, _ := mustTempStore(t)
		return s
	})
}

func TestOutboxContract(t *testing.T) {
	storetest.RunQueue(t, func(t *testing.T) storetest.Queue {
		s, _ := mustTempStore(t)
		return s.Outbox()
	})
}

func TestOpenConfiguresDatabase(t *testing.T) {
	_, path := mustTempStore(t)
	db := mustRawDB(t, path)
	tests := []struct {
		pragma string
		want   string
	}{
		{"journal_mode", "wal"},
	}
	for _, tt := range tests {
		var got string
		if err := db.QueryRow("PRAGMA " + tt.pragma).Scan(&got); err != nil {
			t.Fatalf("PRAGMA %s: %v", tt.pragma, err)
		}
		if got != tt.want {
			t.Errorf("PRAGMA %s = %q, want %q", tt.pragma, got, tt.want)
		}
	}
	for _, table := range []string{"conversations", "messages", "exchanges", "user_tombstones", "conversation_tombstones", "summaries", "facts",
		"memory_items", "memory_items_fts", "outbox", "schema_migrations", "provider_states"} {
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE name = ?`, table).Scan(&n); err != nil || n != 1 {
			t.Errorf("table %s: found %d (%v), want 1", table, n, err)
		}
	}
	// Every secondary index is led by tenant, but the tombstones' and the
	// provider states' and the pending queue purges', led by a digest of
	// the tenant and the ids (contract.UserTombstone, contract.StateDigest)
	// or by expiry.
	rows, err := db.Query(`SELECT il.name, ii.name FROM sqlite_master m
		JOIN pragma_index_list(m.name) il
		JOIN pragma_index_info(il.name) ii ON ii.seqno = 0
		WHERE m.type = 'table' AND m.name NOT IN ('outbox', 'outbox_leases', 'schema_migrations', 'user_tombstones', 'conversation_tombstones', 'provider_states', 'queue_purges', 'held_responses')
			AND m.name NOT LIKE 'memory_items_fts%'`)
	if err != nil {
		t.Fatalf("list indexes: %v", err)
	}
	defer rows.Close()
	indexes := 0
	for rows.Next() {
		var index, first string
		if err := rows.Scan(&index, &first); err != nil {
			t.Fatal(err)
		}
		indexes++
		if first != "tenant" {
			t.Errorf("index %s is led by %s, want tenant", index, first)
		}
	}
	if err := rows.Err(); err != nil || indexes < 8 {
		t.Fatalf("checked %d indexes (%v); expected the schema's indexes", indexes, err)
	}
}

func TestReopenKeepsDataAndMigrations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memgate.db")
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	ctx := context.Background()

	first, err := sqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	ex := memory.Exchange{ID: "ex-1", Identity: id, At: time.Now(),
		Turn:  []memory.Message{{Role: "user", Content: "remember me"}},
		Reply: memory.Message{Role: "assistant", Content: "I will"}}
	if _, err := first.SaveExchange(ctx, ex); err != nil {
		t.Fatalf("SaveExchange: %v", err)
	}
	if err := first.Outbox().Enqueue(ctx, []byte("queued before restart")); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	before := migrationRecords(t, mustRawDB(t, path))
	if len(before) == 0 {
		t.Fatal("no migrations recorded")
	}

	second := mustOpen(t, path)
	if err := second.Migrate(ctx); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
	after := migrationRecords(t, mustRawDB(t, path))
	if len(after) != len(before) {
		t.Fatalf("migrations recorded: %v before reopen, %v after", before, after)
	}
	for v, appliedAt := range before {
		if after[v] != appliedAt {
			t.Errorf("migration %d re-applied: applied_at %d, then %d", v, appliedAt, after[v])
		}
	}
	_, msgs, err := second.Conversation(ctx, id)
	if err != nil || len(msgs) != 2 || msgs[0].Content != "remember me" {
		t.Fatalf("after reopen: %d messages, %v; want the 2 stored ones", len(msgs), err)
	}
	ds, err := second.Outbox().Claim(ctx, "w", 10, time.Hour, 0)
	if err != nil || len(ds) != 1 || string(ds[0].Payload) != "queued before restart" {
		t.Fatalf("after reopen: claimed %+v, %v; want the queued entry", ds, err)
	}
}

// migrationRecords maps each recorded migration version to its applied_at.
func migrationRecords(tb testing.TB, db *sql.DB) map[int]int64 {
	tb.Helper()
	rows, err := db.Query(`SELECT version, applied_at FROM schema_migrations`)
	if err != nil {
		tb.Fatalf("read schema_migrations: %v", err)
	}
	defer rows.Close()
	out := map[int]int64{}
	for rows.Next() {
		var v int
		var at int64
		if err := rows.Scan(&v, &at); err != nil {
			tb.Fatal(err)
		}
		out[v] = at
	}
	return out
}

// TestConcurrentOpenMigratesOnce opens one fresh file from several stores at
// once, as replicas starting together would: all succeed and each migration
// is recorded once.
func TestConcurrentOpenMigratesOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memgate.db")
	const openers = 4
	var wg sync.WaitGroup
	errs := make(chan error, openers)
	for range openers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := sqlite.Open(context.Background(), path, nil)
			if err != nil {
				errs <- err
				return
			}
			errs <- errors.Join(s.Ping(context.Background()), s.Close())
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent Open: %v", err)
		}
	}
	var n, distinct int
	if err := mustRawDB(t, path).QueryRow(`SELECT COUNT(*), COUNT(DISTINCT version) FROM schema_migrations`).Scan(&n, &distinct); err != nil {
		t.Fatal(err)
	}
	if n == 0 || n != distinct {
		t.Fatalf("schema_migrations holds %d rows for %d versions", n, distinct)
	}
}

func TestOpenRejectsBadInput(t *testing.T) {
	if _, err := sqlite.Open(context.Background(), "", nil); !errors.Is(err, memory.ErrInvalid) {
		t.Fatalf("Open(\"\") = %v, want memory.ErrInvalid", err)
	}
	s, _ := mustTempStore(t)
	bad := []struct {
		name string
		ex   memory.Exchange
	}{
		{"no exchange id", memory.Exchange{Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c"},
			Reply: memory.Message{Role: "assistant"}}},
		{"bad user id", memory.Exchange{ID: "x", Identity: memory.Identity{Tenant: "t", User: "u/../v", Conversation: "c"},
			Reply: memory.Message{Role: "assistant"}}},
		{"reply without role", memory.Exchange{ID: "x", Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c"}}},
		{"raw not JSON", memory.Exchange{ID: "x", Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c"},
			Reply: memory.Message{Role: "assistant", Raw: []byte("{nope")}}},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.SaveExchange(context.Background(), tt.ex); !errors.Is(err, memory.ErrInvalid) {
				t.Fatalf("SaveExchange = %v, want memory.ErrInvalid", err)
			}
			if cs, err := s.Conversations(context.Background(), tt.ex.Tenant, tt.ex.User); err != nil || len(cs) != 0 {
				t.Fatalf("after rejected save: %d conversations, %v", len(cs), err)
			}
		})
	}
}

func TestTombstoneExpiryContract(t *testing.T) {
	storetest.RunTombstoneExpiry(t, func(t *testing.T) (storetest.TombstoneStore, storetest.Tombstones) {
		s, path := mustTempStore(t)
		db := mustRawDB(t, path)
		return s, storetest.Tombstones{
			Age: func(ctx context.Context, by time.Duration) error {
				_, err := db.ExecContext(ctx, `UPDATE conversation_tombstones SET deleted_at = deleted_at - ?`, by.Nanoseconds())
				return err
			},
			Count: func(ctx context.Context) (n int, err error) {
				return n, db.QueryRowContext(ctx, `SELECT COUNT(*) FROM conversation_tombstones`).Scan(&n)
			},
		}
	})
}

func TestPendingPurgesContract(t *testing.T) {
	storetest.RunPendingPurges(t, func(t *testing.T) storetest.PurgeLedger {
		s, _ := mustTempStore(t)
		return s
	})
	storetest.RunErasurePurges(t, func(t *testing.T) storetest.ErasingLedger {
		s, _ := mustTempStore(t)
		return s
	})
}
