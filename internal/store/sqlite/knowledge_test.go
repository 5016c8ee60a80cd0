package sqlite_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"math"
	"path/filepath"
	"testing"

	"github.com/memgate/memgate/internal/memory"
	sqlitemigrations "github.com/memgate/memgate/migrations/sqlite"

	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/store/storetest"
)

var _ storetest.KnowledgeStore = (*sqlite.Store)(nil)

func TestKnowledgeContract(t *testing.T) {
	storetest.RunKnowledge(t, func(t *testing.T) storetest.KnowledgeStore {
		s, _ := mustTempStore(t)
		return s
	})
}

func TestErasureContract(t *testing.T) {
	storetest.RunErasure(t, func(t *testing.T) storetest.KnowledgeStore {
		s, _ := mustTempStore(t)
		return s
	})
}

// TestKnowledgeOnOneReadConnection runs the contract with a read pool of one
// connection: a read that queries again while its rows still hold a
// connection blocks forever there. Under load, with every pooled connection
// held that way, the request path deadlocked until its contexts expired
// (every memory-on request at 16 connections degraded).
func TestKnowledgeOnOneReadConnection(t *testing.T) {
	storetest.RunKnowledge(t, func(t *testing.T) storetest.KnowledgeStore {
		s, _ := mustTempStore(t)
		sqlite.SetReadConns(s, 1)
		return s
	})
}

// TestUpgradeFromFirstMigration opens a database made by the first
// migration alone, holding a summary: the upgrade keeps it (covering no
// tokens) and later versions record covered tokens.
func TestUpgradeFromFirstMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db := mustRawDB(t, path)
	first, err := fs.ReadFile(sqlitemigrations.FS, "0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		string(first),
		`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`,
		`INSERT INTO schema_migrations VALUES (1, '0001_init.sql', 0)`,
		`INSERT INTO conversations (tenant, user_id, id, created_at, updated_at) VALUES ('acme', 'alice', 'c1', 0, 0)`,
		`INSERT INTO summaries (tenant, user_id, conversation, version, from_seq, to_seq, content, tokens, created_at)
			VALUES ('acme', 'alice', 'c1', 1, 1, 4, 'old summary', 12, 0)`,
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("seed old database: %v", err)
		}
	}
	db.Close()

	s := mustOpen(t, path)
	ctx := context.Background()
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	old, err := s.LatestSummary(ctx, id)
	if err != nil {
		t.Fatalf("LatestSummary after upgrade: %v", err)
	}
	if old.Version != 1 || old.Text != "old summary" || old.Tokens != 12 || old.CoveredTokens != 0 {
		t.Fatalf("upgraded summary = %+v", old)
	}
	next := memory.Summary{Tenant: "acme", User: "alice", Conversation: "c1", Version: 2, FromSeq: 1, ToSeq: 8,
		Text: "new summary", Tokens: 20, CoveredTokens: 640}
	if err := s.SaveSummary(ctx, next); err != nil {
		t.Fatalf("SaveSummary after upgrade: %v", err)
	}
	if got, err := s.LatestSummary(ctx, id); err != nil || got.CoveredTokens != 640 || got.CreatedAt.IsZero() {
		t.Fatalf("LatestSummary = %+v, %v; want covered tokens 640 and a creation time", got, err)
	}
}

// TestEmbeddingsStoredAsLittleEndianFloat32 pins the on-disk vector format:
// dims little-endian IEEE 754 float32s.
func TestEmbeddingsStoredAsLittleEndianFloat32(t *testing.T) {
	s, path := mustTempStore(t)
	vec := []float32{1, -2.5, float32(math.Pi), 0}
	if err := s.AddItems(context.Background(), []memory.Item{{Tenant: "acme", User: "alice", Kind: "fact", Ref: "1",
		Text: "city: Lisbon", Embedding: vec, Model: "m", Dims: 4}}); err != nil {
		t.Fatalf("AddItems: %v", err)
	}
	var blob []byte
	var dims int
	if err := mustRawDB(t, path).QueryRow(`SELECT embedding, dims FROM memory_items`).Scan(&blob, &dims); err != nil {
		t.Fatal(err)
	}
	if dims != 4 || len(blob) != 16 {
		t.Fatalf("stored %d bytes for %d dims", len(blob), dims)
	}
	for i, want := range vec {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(blob[4*i:])); got != want {
			t.Fatalf("element %d = %v, want %v", i, got, want)
		}
	}
}

func TestKnowledgeRejectsBadInput(t *testing.T) {
	s, _ := mustTempStore(t)
	ctx := context.Background()
	good := memory.Item{Tenant: "acme", User: "alice", Kind: "message", Ref: "r", Text: "x", Embedding: []float32{1, 0}, Model: "m", Dims: 2}
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"item kind", func() error { it := good; it.Kind = "note"; return s.AddItems(ctx, []memory.Item{it}) }, memory.ErrInvalid},
		{"item dims", func() error { it := good; it.Dims = 3; return s.AddItems(ctx, []memory.Item{it}) }, memory.ErrInvalid},
		{"item model", func() error { it := good; it.Model = ""; return s.AddItems(ctx, []memory.Item{it}) }, memory.ErrInvalid},
		{"item tenant", func() error { it := good; it.Tenant = "a b"; return s.AddItems(ctx, []memory.Item{it}) }, memory.ErrInvalid},
		{"item ref", func() error { it := good; it.Ref = ""; return s.AddItems(ctx, []memory.Item{it}) }, memory.ErrInvalid},
		{"embedding without vector", func() error { return s.EmbedItems(ctx, []memory.Item{{ID: 1, Model: "m", Dims: 2}}) }, memory.ErrInvalid},
		{"fact type", func() error {
			_, err := s.UpsertFact(ctx, memory.Fact{Tenant: "acme", User: "alice", Type: "mood", Key: "k", Value: "v"}, 0)
			return err
		}, memory.ErrInvalid},
		{"fact blank key", func() error {
			_, err := s.UpsertFact(ctx, memory.Fact{Tenant: "acme", User: "alice", Type: memory.FactGoal, Key: "  ", Value: "v"}, 0)
			return err
		}, memory.ErrInvalid},
		{"summary of unknown conversation", func() error {
			return s.SaveSummary(ctx, memory.Summary{Tenant: "acme", User: "alice", Conversation: "nope", Version: 1})
		}, memory.ErrNotFound},
		{"summary seq range", func() error {
			return s.SaveSummary(ctx, memory.Summary{Tenant: "acme", User: "alice", Conversation: "c1", Version: 1, FromSeq: 5, ToSeq: 2})
		}, memory.ErrInvalid},
		{"query dims", func() error {
			_, err := s.SearchVector(ctx, memory.ItemQuery{Tenant: "acme", User: "alice", Embedding: []float32{1, 0}, Model: "m", Dims: 3, Limit: 1})
			return err
		}, memory.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
	if left, err := s.ItemsToEmbed(ctx, "m", 2, 0, 10); err != nil || len(left) != 0 {
		t.Fatalf("rejected items were stored: %+v, %v", left, err)
	}
}

var _ storetest.AdoptStore = (*sqlite.Store)(nil)

func TestAdoptContract(t *testing.T) {
	storetest.RunAdopt(t, func(t *testing.T) storetest.AdoptStore {
		s, _ := mustTempStore(t)
		return s
	})
}

// groupSaver stores every exchange through SaveExchanges, so the Adopt
// contract checks the group commit's path too.
type groupSaver struct{ *sqlite.Store }

func (g groupSaver) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	res, err := g.SaveExchanges(ctx, []memory.Exchange{ex})
	if err != nil {
		return memory.SaveResult{}, err
	}
	return res[0], nil
}

func TestAdoptContractThroughGroupCommit(t *testing.T) {
	storetest.RunAdopt(t, func(t *testing.T) storetest.AdoptStore {
		s, _ := mustTempStore(t)
		return groupSaver{s}
	})
}
