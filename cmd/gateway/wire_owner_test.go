package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/tokens"
)

// TestAssemblerCountsPerOwner: the wired assembler counts each request
// through its owner's view of the token counter, Claude's estimate
// included: a message one user's request had counted is counted anew for
// a user of another tenant and for another user of the same tenant, and
// answered from the memo only for the same user.
func TestAssemblerCountsPerOwner(t *testing.T) {
	cfg := config.Default()
	cfg.Store.SQLitePath = filepath.Join(t.TempDir(), "memgate.db")
	bk, err := openStore(context.Background(), cfg, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bk.close() })
	for _, model := range []string{"gpt-4o-mini", "claude-sonnet-4-5"} {
		t.Run(model, func(t *testing.T) {
			counter, err := tokens.New(nil)
			if err != nil {
				t.Fatal(err)
			}
			asm, err := newAssembler(cfg, withReads(cfg, bk.store, nil), nil, nil, counter, nil)
			if err != nil {
				t.Fatal(err)
			}
			text := strings.Repeat("a message long enough for its count to be remembered ", 3)
			msg, err := memory.ParseMessage([]byte(fmt.Sprintf(`{"role":"user","content":%q}`, text)))
			if err != nil {
				t.Fatal(err)
			}
			// counted reports whether tenant's user's request tokenized
			// anything (the memo did not answer it all).
			counted := func(tenant, user string) bool {
				t.Helper()
				before := counter.Work()
				_, err := asm.Prepare(context.Background(), memory.Request{Model: model, Mode: memory.ModeOn,
					Identity: memory.Identity{Tenant: tenant, User: user, Conversation: "c"}, Messages: []memory.Message{msg}})
				if err != nil {
					t.Fatal(err)
				}
				return counter.Work() != before
			}
			if !counted("acme", "alice") {
				t.Fatal("alice's request counted nothing")
			}
			if counted("acme", "alice") {
				t.Error("alice's second request was not answered from the memo")
			}
			if !counted("globex", "alice") || !counted("acme", "bob") {
				t.Error("another owner's request was answered from alice's counts")
			}
		})
	}
}
