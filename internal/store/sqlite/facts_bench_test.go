package sqlite_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// BenchmarkUpsertFact measures what the after-save hooks pay per stated
// fact: restating one of 20 facts from one of 4 conversations (each
// statement also records its conversation as a source of the fact).
func BenchmarkUpsertFact(b *testing.B) {
	s, _ := mustTempStore(b)
	ctx := context.Background()
	at := time.Now()
	for i := 0; b.Loop(); i++ {
		f := memory.Fact{Tenant: "acme", User: "alice", Conversation: fmt.Sprint("c", i%4),
			Type: memory.FactPreference, Key: fmt.Sprint("key ", i%20), Value: "value", Confidence: 0.6,
			CreatedAt: at, UpdatedAt: at.Add(time.Duration(i))}
		if _, err := s.UpsertFact(ctx, f, 200); err != nil {
			b.Fatal(err)
		}
	}
}
