package sqlite_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/storetest"
)

// fileBytes returns the database file and its WAL (missing files are empty).
func fileBytes(tb testing.TB, path string) []byte {
	tb.Helper()
	var all []byte
	for _, p := range []string{path, path + "-wal", path + "-journal"} {
		b, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			tb.Fatalf("read %s: %v", p, err)
		}
		all = append(all, b...)
	}
	return all
}

// TestDeleteUserRemovesTextFromDisk stores a unique marker everywhere a
// user's text goes — messages and their raw JSON, a fact, a summary, a
// memory item and its full-text index, and a capture outbox entry that was
// processed and acknowledged — next to another user's rows in the same
// pages, erases the user, and checks that the marker's bytes are in neither
// the database file nor the WAL, while the other user's text still is.
func TestDeleteUserRemovesTextFromDisk(t *testing.T) {
	ctx := context.Background()
	s, path := mustTempStore(t)
	marker := fmt.Sprintf("zqxerasemark%d", time.Now().UnixNano())
	keep := fmt.Sprintf("zqxkeepmark%d", time.Now().UnixNano())
	victim := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	bystander := memory.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}

	for _, u := range []struct {
		id   memory.Identity
		word string
	}{{victim, marker}, {bystander, keep}} {
		ex := memory.Exchange{ID: "ex-" + u.id.User, Identity: u.id, At: time.Now().Add(-time.Minute),
			Turn:  []memory.Message{{Role: "user", Content: "I live in Porto, code word " + u.word}},
			Reply: memory.Message{Role: "assistant", Content: "Noted: " + u.word}}
		payload, err := json.Marshal(ex)
		if err != nil {
			t.Fatal(err)
		}
		// The capture queue: enqueued, claimed, acknowledged (deleted).
		if err := s.Outbox().Enqueue(ctx, payload); err != nil {
			t.Fatal(err)
		}
		ds, err := s.Outbox().Claim(ctx, "w", 10, time.Minute, 0)
		if err != nil || len(ds) != 1 {
			t.Fatalf("Claim = %d entries, %v", len(ds), err)
		}
		if _, err := s.SaveExchange(ctx, ex); err != nil {
			t.Fatal(err)
		}
		if u.id == victim {
			if err := s.Outbox().Ack(ctx, ds[0].ID); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.UpsertFact(ctx, memory.Fact{Tenant: u.id.Tenant, User: u.id.User, Type: memory.FactProfile,
			Key: "code_word", Value: u.word, Confidence: 0.9}, 0); err != nil {
			t.Fatal(err)
		}
		if err := s.SaveSummary(ctx, memory.Summary{Tenant: u.id.Tenant, User: u.id.User, Conversation: u.id.Conversation,
			Version: 1, FromSeq: 1, ToSeq: 2, Text: "The user's code word is " + u.word}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddItems(ctx, []memory.Item{{Tenant: u.id.Tenant, User: u.id.User, Conversation: u.id.Conversation,
			Kind: "message", Ref: memory.Key(ex.ID, 0), Text: "I live in Porto, code word " + u.word,
			Embedding: []float32{1, 0}, Model: "m", Dims: 2}}); err != nil {
			t.Fatal(err)
		}
	}
	before := fileBytes(t, path)
	if !bytes.Contains(before, []byte(marker)) || !bytes.Contains(before, []byte(keep)) {
		t.Fatal("markers not on disk before the erasure: the test cannot see what it checks")
	}

	if err := s.DeleteUser(ctx, victim.Tenant, victim.User); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	after := fileBytes(t, path)
	if i := bytes.Index(after, []byte(marker)); i >= 0 {
		t.Fatalf("erased marker still on disk at byte %d of %d (database + WAL)", i, len(after))
	}
	if !bytes.Contains(after, []byte(keep)) {
		t.Fatal("the other user's text left the disk too")
	}
	if st, err := os.Stat(path + "-wal"); err == nil && st.Size() != 0 {
		t.Fatalf("WAL is %d bytes after the erasure, want truncated", st.Size())
	}
	// The bystander is intact and searchable.
	items, err := s.SearchText(ctx, memory.ItemQuery{Tenant: "acme", User: "bob", Text: keep, Limit: 5})
	if err != nil || len(items) != 1 {
		t.Fatalf("bystander search = %d items, %v", len(items), err)
	}
}

// TestErasedIDsAtRest runs the erased-id contract on the embedded store,
// reading the database file and its WAL byte for byte.
func TestErasedIDsAtRest(t *testing.T) {
	storetest.RunErasedAtRest(t, func(t *testing.T) (storetest.KnowledgeStore, storetest.AtRest) {
		s, path := mustTempStore(t)
		db := mustRawDB(t, path)
		return s, func(ctx context.Context, needle string) ([]string, error) {
			where, err := liveRowsHolding(ctx, db, needle)
			if err != nil {
				return nil, err
			}
			for _, p := range []string{path, path + "-wal", path + "-journal"} {
				b, err := os.ReadFile(p)
				if err != nil && !os.IsNotExist(err) {
					return nil, err
				}
				if i := bytes.Index(b, []byte(needle)); i >= 0 {
					where = append(where, fmt.Sprintf("%s at byte %d", filepath.Base(p), i))
				}
			}
			return where, nil
		}
	})
}

// liveRowsHolding names the tables of db with a row holding needle in any
// column (read as bytes), to say where the file's bytes come from.
func liveRowsHolding(ctx context.Context, db *sql.DB, needle string) ([]string, error) {
	names, err := queryStrings(ctx, db, `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
	if err != nil {
		return nil, err
	}
	var where []string
	for _, name := range names {
		cols, err := queryStrings(ctx, db, `SELECT name FROM pragma_table_info(?)`, name)
		if err != nil {
			return nil, err
		}
		for i, col := range cols {
			cols[i] = fmt.Sprintf(`instr(CAST("%s" AS BLOB), CAST(?1 AS BLOB)) > 0`, col)
		}
		if len(cols) == 0 {
			continue
		}
		var n int
		q := fmt.Sprintf(`SELECT count(*) FROM "%s" WHERE %s`, name, strings.Join(cols, " OR "))
		if err := db.QueryRowContext(ctx, q, needle).Scan(&n); err != nil {
			return nil, fmt.Errorf("scan %s: %w", name, err)
		}
		if n > 0 {
			where = append(where, fmt.Sprintf("table %s (%d rows)", name, n))
		}
	}
	return where, nil
}

// queryStrings returns the single text column of q's rows.
func queryStrings(ctx context.Context, db *sql.DB, q string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
