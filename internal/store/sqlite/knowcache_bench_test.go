package sqlite_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// BenchmarkFacts measures one request's read of a user's 20 current facts
// (a fresh memory.Memo per read, so the store's revision counters, when it
// reads them, are read each time too).
func BenchmarkFacts(b *testing.B) {
	s, _ := mustTempStore(b)
	ctx := context.Background()
	now := time.Now()
	for i := range 20 {
		f := memory.Fact{Tenant: "acme", User: "alice", Type: memory.FactPreference,
			Key: fmt.Sprint("key ", i), Value: fmt.Sprint("a value stated about the user, number ", i), Confidence: 0.8}
		if i%4 == 0 {
			exp := now.Add(time.Hour)
			f.ExpiresAt = &exp
		}
		if _, err := s.UpsertFact(ctx, f, 0); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		fs, err := s.Facts(memory.WithMemo(ctx), "acme", "alice", now, false)
		if err != nil || len(fs) != 20 {
			b.Fatal(len(fs), err)
		}
	}
}

// BenchmarkLatestSummary measures one request's read of a conversation's
// latest summary (a fresh memory.Memo per read).
func BenchmarkLatestSummary(b *testing.B) {
	s, _ := mustTempStore(b)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "bench"}
	ctx := context.Background()
	ex := memory.Exchange{ID: "ex", Identity: id, At: time.Now(),
		Turn:  []memory.Message{{Role: "user", Content: "question"}},
		Reply: memory.Message{Role: "assistant", Content: "answer"}}
	if _, err := s.SaveExchange(ctx, ex); err != nil {
		b.Fatal(err)
	}
	for v := 1; v <= 3; v++ {
		sum := memory.Summary{Tenant: id.Tenant, User: id.User, Conversation: id.Conversation, Version: v,
			FromSeq: 1, ToSeq: 2, Text: "The user is saving for a trip to Lisbon in May; budget R$ 4,200, 84% saved.",
			KeyEvents: []string{"set a savings goal", "booked flights"},
			Preserved: memory.Preserved{Numbers: []string{"4,200", "84%"}, Dates: []string{"May"}, Decisions: []string{"fly TAP"}},
			Tokens:    40, CoveredTokens: 400}
		if err := s.SaveSummary(ctx, sum); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if _, err := s.LatestSummary(memory.WithMemo(ctx), id); err != nil {
			b.Fatal(err)
		}
	}
}
