package sqlite_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/storetest"
)

// BenchmarkSaveExchange measures storing one new-message-only exchange into
// a growing conversation.
func BenchmarkSaveExchange(b *testing.B) {
	s, _ := mustTempStore(b)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "bench"}
	ctx := context.Background()
	at := time.Now()
	for i := 0; b.Loop(); i++ {
		ex := memory.Exchange{ID: fmt.Sprint("ex-", i), Identity: id, At: at,
			Turn:  []memory.Message{{Role: "user", Content: "how much did I save this month?"}},
			Reply: memory.Message{Role: "assistant", Content: "You saved R$ 420 so far, 84% of your goal."}}
		if _, err := s.SaveExchange(ctx, ex); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRecent measures loading the 20 newest messages of a 2,000-message
// conversation.
func BenchmarkRecent(b *testing.B) {
	s, _ := mustTempStore(b)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "bench"}
	ctx := context.Background()
	for i := range 1000 {
		ex := memory.Exchange{ID: fmt.Sprint("ex-", i), Identity: id, At: time.Now(),
			Turn:  []memory.Message{{Role: "user", Content: fmt.Sprint("question ", i)}},
			Reply: memory.Message{Role: "assistant", Content: fmt.Sprint("answer ", i)}}
		if _, err := s.SaveExchange(ctx, ex); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		msgs, err := s.Recent(ctx, id, 20)
		if err != nil || len(msgs) != 20 {
			b.Fatalf("Recent = %d, %v", len(msgs), err)
		}
	}
}

// BenchmarkRecentAfterSave measures a request's pattern on a 2,000-message
// conversation: a save (which drops every reader's page cache), then the
// 20 newest messages read. It includes the
// save; compare it with BenchmarkSaveExchange.
func BenchmarkRecentAfterSave(b *testing.B) {
	s, _ := mustTempStore(b)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "bench"}
	ctx := context.Background()
	save := func(i int) {
		ex := memory.Exchange{ID: fmt.Sprint("ex-", i), Identity: id, At: time.Now(),
			Turn:  []memory.Message{{Role: "user", Content: fmt.Sprint("question ", i)}},
			Reply: memory.Message{Role: "assistant", Content: fmt.Sprint("answer ", i)}}
		if _, err := s.SaveExchange(ctx, ex); err != nil {
			b.Fatal(err)
		}
	}
	for i := range 1000 {
		save(i)
	}
	for i := 1000; b.Loop(); i++ {
		save(i)
		msgs, err := s.Recent(ctx, id, 20)
		if err != nil || len(msgs) != 20 {
			b.Fatalf("Recent = %d, %v", len(msgs), err)
		}
	}
}

// BenchmarkLongHistory measures the first capture and the indexing of a
// 45,000-message request (storetest.BenchLongHistory).
func BenchmarkLongHistory(b *testing.B) {
	s, _ := mustTempStore(b)
	storetest.BenchLongHistory(b, s, 45_000, "u")
}
