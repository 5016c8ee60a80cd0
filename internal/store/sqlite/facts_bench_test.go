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
// statement also records its conversation as a source of the fact), by
// the management API (no message) or by enrichment (each statement from
// its own stored message, recorded as one of the fact's mentions).
func BenchmarkUpsertFact(b *testing.B) {
	for _, fromMessage := range []bool{false, true} {
		b.Run(fmt.Sprint("message=", fromMessage), func(b *testing.B) {
			s, _ := mustTempStore(b)
			ctx := context.Background()
			at := time.Now()
			for i := 0; b.Loop(); i++ {
				f := memory.Fact{Tenant: "acme", User: "alice", Conversation: fmt.Sprint("c", i%4),
					Type: memory.FactPreference, Key: fmt.Sprint("key ", i%20), Value: "value", Confidence: 0.6,
					CreatedAt: at, UpdatedAt: at.Add(time.Duration(i))}
				if fromMessage {
					f.Source = memory.Key(fmt.Sprint("ex", i), 0)
				}
				if _, err := s.UpsertFact(ctx, f, 200); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
