package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// HistoryStore is what BenchLongHistory uses of a store.
type HistoryStore interface {
	SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error)
	AddItems(ctx context.Context, items []memory.Item) error
}

// historyIndexChunk is how many items the benchmark hands AddItems at a
// time: the recall Indexer's indexChunk.
const historyIndexChunk = 64

// historyDims is the dimension of the benchmark's item vectors: the
// built-in encoder's.
const historyDims = 512

// BenchLongHistory measures a client that resends its whole history: the
// first capture of an exchange whose request holds n messages ("save", one
// SaveExchange storing all of them), and the background indexing of its
// messages ("index", AddItems of one message item per stored message, with
// a vector of historyDims and the erasure guard the write path sets, historyIndexChunk at a time, as
// the recall Indexer writes them). Every iteration uses a new user, named
// run-<count>: run must be new to s.
func BenchLongHistory(b *testing.B, s HistoryStore, n int, run string) {
	b.Helper()
	ctx := context.Background()
	users := 0
	save := func(i int) (memory.Exchange, memory.SaveResult) {
		users++
		id := memory.Identity{Tenant: "bench", User: fmt.Sprint(run, "-", users), Conversation: "history"}
		prior := make([]memory.Message, n-2)
		for k := range prior {
			role := "user"
			if k%2 == 1 {
				role = "assistant"
			}
			prior[k] = memory.Message{Role: role, Content: fmt.Sprint("m", k)}
		}
		ex := memory.Exchange{ID: fmt.Sprint("ex-", i), Identity: id, Prior: prior, At: time.Now(),
			Turn:  []memory.Message{{Role: "user", Content: "and now?"}},
			Reply: memory.Message{Role: "assistant", Content: "ok"}}
		res, err := s.SaveExchange(ctx, ex)
		if err != nil {
			b.Fatal(err)
		}
		if res.Inserted != n {
			b.Fatalf("the save stored %d messages, want %d", res.Inserted, n)
		}
		return ex, res
	}
	b.Run("save", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			save(i)
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/msg")
	})
	b.Run("index", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			ex, res := save(i)
			items := make([]memory.Item, len(res.Stored))
			for k, m := range res.Stored {
				vec := make([]float32, historyDims)
				vec[k%historyDims] = 1
				items[k] = memory.Item{Tenant: ex.Tenant, User: ex.User, Conversation: ex.Conversation,
					Kind: "message", Ref: m.Key, Text: m.Content, Embedding: vec, Model: "bench", Dims: historyDims,
					CreatedAt: ex.At, SaidAt: ex.At, GuardSince: ex.At}
			}
			b.StartTimer()
			for start := 0; start < len(items); start += historyIndexChunk {
				if err := s.AddItems(ctx, items[start:min(len(items), start+historyIndexChunk)]); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/msg")
	})
}
