package contract

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// convRow is a query's row holding a conversation name.
type convRow string

func (r convRow) Scan(dest ...any) error { *dest[0].(*string) = string(r); return nil }

func TestCheckLate(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	fact := func(conv, source string, guard time.Time) memory.Fact {
		return memory.Fact{Tenant: "acme", User: "alice", Conversation: conv, Source: source, GuardSince: guard}
	}
	tests := []struct {
		name     string
		f        memory.Fact
		stored   string // the conversation the query answers
		asked    bool   // whether the store is asked
		erased   bool
		wantConv string
	}{
		{"unguarded: not checked", fact("c1", "ex:0", time.Time{}), "", false, false, "c1"},
		{"no conversation: not checked", fact("", "ex:0", at), "", false, false, ""},
		{"default naming no message: refused unasked", fact(memory.DefaultConversation, "", at), "", false, true, memory.DefaultConversation},
		{"message live", fact("c1", "ex:0", at), "c1", true, false, "c1"},
		{"message gone", fact("c1", "ex:0", at), "", true, true, "c1"},
		{"no message named: refused unasked", fact("c1", "", at), "c1", false, true, "c1"},
		{"message of default moved: the fact follows", fact(memory.DefaultConversation, "ex:0", at), "chat", true, false, "chat"},
		{"message of default gone", fact(memory.DefaultConversation, "ex:0", at), "", true, true, memory.DefaultConversation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			asked := false
			query := func(_ context.Context, _ string, args ...any) convRow {
				asked = true
				if want := []any{"acme", "alice", tt.f.Conversation, tt.f.Source}; len(args) != 4 || args[2] != want[2] || args[3] != want[3] {
					t.Errorf("query args = %v, want %v", args, want)
				}
				return convRow(tt.stored)
			}
			f := tt.f
			err := CheckLate(context.Background(), query, "sql", FactSource(&f))
			if asked != tt.asked || errors.Is(err, memory.ErrErased) != tt.erased || err != nil && !tt.erased {
				t.Fatalf("asked %v, err %v; want asked %v, erased %v", asked, err, tt.asked, tt.erased)
			}
			if f.Conversation != tt.wantConv {
				t.Fatalf("fact's conversation = %q, want %q", f.Conversation, tt.wantConv)
			}
		})
	}
	// A summary never moves: its last message elsewhere refuses it.
	sum := memory.Summary{Tenant: "acme", User: "alice", Conversation: memory.DefaultConversation, Through: "ex:1", GuardSince: at}
	moved := func(context.Context, string, ...any) convRow { return "chat" }
	if err := CheckLate(context.Background(), moved, "sql", SummarySource(sum)); !errors.Is(err, memory.ErrErased) {
		t.Fatalf("summary whose last message moved = %v, want memory.ErrErased", err)
	}
	sum.Through = ""
	if err := CheckLate(context.Background(), moved, "sql", SummarySource(sum)); !errors.Is(err, memory.ErrErased) {
		t.Fatalf("guarded summary naming no message = %v, want memory.ErrErased", err)
	}
	if sum.GuardSince = (time.Time{}); SummarySource(sum) != nil {
		t.Fatal("an unguarded summary is checked")
	}
}
