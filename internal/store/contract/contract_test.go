package contract

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

func TestValidExchange(t *testing.T) {
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	reply := memory.Message{Role: "assistant", Content: "hi"}
	tests := []struct {
		name    string
		ex      memory.Exchange
		invalid bool
	}{
		{"ok", memory.Exchange{ID: "e1", Identity: id, Reply: reply}, false},
		{"no id", memory.Exchange{Identity: id, Reply: reply}, true},
		{"bad tenant", memory.Exchange{ID: "e1", Identity: memory.Identity{Tenant: "a/b", User: "u", Conversation: "c"}, Reply: reply}, true},
		{"no reply", memory.Exchange{ID: "e1", Identity: id}, true},
		{"turn without role", memory.Exchange{ID: "e1", Identity: id, Turn: []memory.Message{{Content: "x"}}, Reply: reply}, true},
		{"prior without role", memory.Exchange{ID: "e1", Identity: id, Prior: []memory.Message{{Content: "x"}}, Reply: reply}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidExchange(tt.ex)
			if got := errors.Is(err, memory.ErrInvalid); got != tt.invalid || (err != nil) != tt.invalid {
				t.Fatalf("ValidExchange = %v, want invalid %v", err, tt.invalid)
			}
		})
	}
}

func TestValidItemAndEmbedding(t *testing.T) {
	base := memory.Item{Tenant: "acme", User: "alice", Kind: "message", Ref: "m1"}
	with := func(f func(*memory.Item)) memory.Item { it := base; f(&it); return it }
	tests := []struct {
		name    string
		it      memory.Item
		invalid bool
	}{
		{"ok", base, false},
		{"vector with model", with(func(it *memory.Item) { it.Embedding, it.Model = []float32{1, 2}, "m" }), false},
		{"vector without model", with(func(it *memory.Item) { it.Embedding = []float32{1, 2} }), true},
		{"dims disagree", with(func(it *memory.Item) { it.Embedding, it.Model, it.Dims = []float32{1, 2}, "m", 3 }), true},
		{"empty vector", with(func(it *memory.Item) { it.Embedding, it.Model = []float32{}, "m" }), true},
		{"unknown kind", with(func(it *memory.Item) { it.Kind = "note" }), true},
		{"no ref", with(func(it *memory.Item) { it.Ref = "" }), true},
		{"negative chunk", with(func(it *memory.Item) { it.Chunk = -1 }), true},
		{"bad conversation", with(func(it *memory.Item) { it.Conversation = "a/b" }), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := ValidItem(tt.it); (err != nil) != tt.invalid || (err != nil && !errors.Is(err, memory.ErrInvalid)) {
				t.Fatalf("ValidItem = %v, want invalid %v", err, tt.invalid)
			}
		})
	}
	if err := ValidEmbedding(base, true); !errors.Is(err, memory.ErrInvalid) {
		t.Fatalf("ValidEmbedding(no vector, required) = %v, want memory.ErrInvalid", err)
	}
}

func TestValidFact(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f := memory.Fact{Tenant: "acme", User: "alice", Type: memory.FactPreference, Key: " Diet ", Value: "vegan", Confidence: 1.7}
	got, err := ValidFact(f, now)
	if err != nil {
		t.Fatal(err)
	}
	if got.Confidence != 1 || got.Mentions != 1 || !got.UpdatedAt.Equal(now) || !got.CreatedAt.Equal(now) {
		t.Fatalf("ValidFact = %+v, want confidence 1, one mention, both times now", got)
	}
	for name, bad := range map[string]memory.Fact{
		"empty key":   {Tenant: "acme", User: "alice", Type: memory.FactPreference, Key: "  ", Value: "v"},
		"empty value": {Tenant: "acme", User: "alice", Type: memory.FactPreference, Key: "k", Value: " "},
		"bad type":    {Tenant: "acme", User: "alice", Type: "mood", Key: "k", Value: "v"},
		"NaN":         {Tenant: "acme", User: "alice", Type: memory.FactPreference, Key: "k", Value: "v", Confidence: math.NaN()},
	} {
		if _, err := ValidFact(bad, now); !errors.Is(err, memory.ErrInvalid) {
			t.Errorf("%s: ValidFact = %v, want memory.ErrInvalid", name, err)
		}
	}
	if FactKey("  Favourite   COLOUR ") != "favourite colour" || !SameFactValue("Dark  Blue", "dark blue") || SameFactValue("blue", "green") {
		t.Fatal("fact keys and values do not compare up to case and whitespace")
	}
	if c := RestatedConfidence(0.5, 0.7); math.Abs(c-0.8) > 1e-12 || RestatedConfidence(0.95, 0.2) != 1 {
		t.Fatalf("RestatedConfidence = %v, want max + 0.1 capped at 1", c)
	}
}

func TestSummaryListsRoundTrip(t *testing.T) {
	s := memory.Summary{KeyEvents: []string{"moved"}, Preserved: memory.Preserved{Numbers: []string{"42"}}}
	ke, pr, err := SummaryLists(s)
	if err != nil {
		t.Fatal(err)
	}
	if string(pr) != `{"numbers":["42"],"dates":[],"decisions":[]}` {
		t.Fatalf("preserved = %s, want missing lists as []", pr)
	}
	var back memory.Summary
	if err := ReadSummaryLists(&back, ke, pr); err != nil || back.KeyEvents[0] != "moved" || back.Preserved.Numbers[0] != "42" {
		t.Fatalf("ReadSummaryLists = %+v, %v", back, err)
	}
	for _, bad := range []memory.Summary{
		{Tenant: "acme", User: "alice", Conversation: "c1", Version: 0},
		{Tenant: "acme", User: "alice", Conversation: "c1", Version: 1, FromSeq: 3, ToSeq: 2},
	} {
		if _, _, _, err := ValidSummary(bad, time.Now()); err == nil {
			t.Errorf("ValidSummary(%+v) = nil, want an error", bad)
		}
	}
	now := time.Unix(7, 0)
	if got, _, _, err := ValidSummary(memory.Summary{Tenant: "acme", User: "alice", Conversation: "c1", Version: 1}, now); err != nil || !got.CreatedAt.Equal(now) {
		t.Errorf("ValidSummary without a time = %v, %v, want created now", got.CreatedAt, err)
	}
	if got, _, _, _ := ValidSummary(memory.Summary{Tenant: "acme", User: "alice", Conversation: "c1", Version: 1, CreatedAt: time.Unix(3, 0)}, now); !got.CreatedAt.Equal(time.Unix(3, 0)) {
		t.Errorf("ValidSummary kept CreatedAt %v, want its own", got.CreatedAt)
	}
}

func TestBranches(t *testing.T) {
	t1, t2 := time.Unix(1, 0), time.Unix(2, 0)
	// Read newest first, as the stores read them.
	bs := Branches([]memory.Message{{Seq: 4}, {Seq: 4}, {Seq: 3}}, []time.Time{t2, t1, t1})
	if len(bs) != 2 || len(bs[0].Messages) != 2 || bs[0].Messages[0].Seq != 3 || !bs[0].SupersededAt.Equal(t1) || len(bs[1].Messages) != 1 {
		t.Fatalf("branches = %+v, want two: #3 and #4 at 1, then #4 at 2", bs)
	}
	if bs := Branches(nil, nil); bs == nil || len(bs) != 0 {
		t.Fatalf("no messages: %#v, want an empty slice", bs)
	}
}

func TestMigrations(t *testing.T) {
	ms, err := Migrations(fstest.MapFS{
		"0002_b.sql": {Data: []byte("B")},
		"0001_a.sql": {Data: []byte("A")},
		"embed.go":   {Data: []byte("package x")},
	})
	if err != nil || len(ms) != 2 || ms[0].Name != "0001_a" || ms[1].Version != 2 || ms[1].SQL != "B" {
		t.Fatalf("Migrations = %+v, %v", ms, err)
	}
	for name, fsys := range map[string]fstest.MapFS{
		"unnumbered": {"init.sql": {}},
		"shared":     {"0001_a.sql": {}, "0001_b.sql": {}},
	} {
		if _, err := Migrations(fsys); err == nil {
			t.Errorf("%s: Migrations = nil error", name)
		}
	}
}

func TestMigrateRefusesNewerSchema(t *testing.T) {
	fsys := fstest.MapFS{"0001_a.sql": {Data: []byte("A")}, "0003_c.sql": {Data: []byte("C")}}
	tests := []struct {
		name string
		// before and after are what the store records before Migrate and
		// once it has applied its migrations.
		before, after int
		tooNew        int // 0: no error
		applies       bool
	}{
		{"fresh", 0, 3, 0, true},
		{"current", 3, 3, 0, true},
		{"gap below the newest", 2, 3, 0, true},
		{"newer", 4, 4, 4, false},
		{"newer build migrated meanwhile", 0, 5, 5, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			applied := false
			recorded := func(context.Context) (int, error) {
				if applied {
					return tt.after, nil
				}
				return tt.before, nil
			}
			apply := func(context.Context, Migration) (bool, error) { applied = true; return false, nil }
			err := Migrate(context.Background(), fsys, recorded, apply, slog.New(slog.DiscardHandler), "test")
			if applied != tt.applies {
				t.Errorf("applied = %v, want %v", applied, tt.applies)
			}
			if tt.tooNew == 0 {
				if err != nil {
					t.Fatalf("Migrate = %v", err)
				}
				return
			}
			var e *SchemaTooNewError
			if !errors.Is(err, memory.ErrSchemaTooNew) || !errors.As(err, &e) || e.Version != tt.tooNew || e.Known != 3 || e.Store != "test" {
				t.Fatalf("Migrate = %v, want a SchemaTooNewError at %d, known 3", err, tt.tooNew)
			}
			for _, want := range []string{"0003", fmt.Sprintf("%04d", tt.tooNew), "upgrade"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}
