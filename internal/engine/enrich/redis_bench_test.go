package enrich

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
	redisstore "github.com/memgate/memgate/internal/store/redis"
	"github.com/memgate/memgate/internal/testenv"
)

// sideModel stands in for the hooks' work on a round: per conversation of
// the round, one call of a side model that takes perCall, made one
// conversation after another (as the Compactor does). It counts the
// conversations enriched by two processes at once.
type sideModel struct {
	perCall  time.Duration
	mu       sync.Mutex
	inFlight map[memory.Identity]int
	overlaps int
	calls    int
}

func (m *sideModel) AfterSaveBatch(ctx context.Context, exs []memory.Exchange, _ []memory.SaveResult) error {
	var convs []memory.Identity
	for _, ex := range exs {
		if len(convs) == 0 || convs[len(convs)-1] != ex.Identity {
			convs = append(convs, ex.Identity)
		}
	}
	for _, id := range convs {
		m.mu.Lock()
		m.inFlight[id]++
		if m.inFlight[id] > 1 {
			m.overlaps++
		}
		m.calls++
		m.mu.Unlock()
		time.Sleep(m.perCall)
		m.mu.Lock()
		m.inFlight[id]--
		m.mu.Unlock()
	}
	return nil
}

// BenchmarkRedisEnrichers: two processes (a Redis client each) drain a
// backlog of exchanges spread over conversations (40 of 10 turns, 200 of
// 2) from one enrichment stream, with a side model taking 10ms per conversation and round.
// Modes: "none" (every enricher enriches whatever it claims: today's Redis
// wiring before the conversation leases), "conversation" (the wiring now)
// and "stream" (one lease on the whole stream, as SQLite's outbox has).
// It reports exchanges enriched per second, side-model calls per op, and
// overlaps: conversations two processes enriched at once.
func BenchmarkRedisEnrichers(b *testing.B) {
	for _, shape := range [][2]int{{40, 10}, {200, 2}} {
		for _, batch := range []int{32, 256} {
			for _, mode := range []string{"none", "conversation", "stream"} {
				b.Run(fmt.Sprintf("convs=%d/batch=%d/%s", shape[0], batch, mode), func(b *testing.B) { benchRedisEnrichers(b, mode, batch, shape[0], shape[1]) })
			}
		}
	}
}

func benchRedisEnrichers(b *testing.B, mode string, batch, convs, perConv int) {
	ctx := context.Background()
	url := testenv.RedisURL(b)
	var total time.Duration
	var overlaps, calls int
	for range b.N {
		prefix := testenv.RedisPrefix(b)
		model := &sideModel{perCall: 10 * time.Millisecond, inFlight: map[memory.Identity]int{}}
		var queues []*redisstore.Queue
		for range 2 {
			rdb, err := redisstore.NewClient(url)
			if err != nil {
				b.Fatal(err)
			}
			defer rdb.Close()
			q, err := redisstore.NewQueue(ctx, rdb, redisstore.QueueConfig{Prefix: prefix})
			if err != nil {
				b.Fatal(err)
			}
			eq, err := q.Sibling(ctx, "enrich")
			if err != nil {
				b.Fatal(err)
			}
			queues = append(queues, eq)
		}
		for i := range perConv {
			for c := range convs {
				ex := storedExchange(b, record.NewExchangeID(), fmt.Sprintf("turn %d", i), "ok")
				ex.Conversation = fmt.Sprintf("c%d", c)
				p, err := record.EncodeEnrichment(ex, memory.SaveResult{Inserted: 2})
				if err != nil {
					b.Fatal(err)
				}
				if err := queues[0].Enqueue(ctx, p); err != nil {
					b.Fatal(err)
				}
			}
		}
		start := time.Now()
		var stops []func()
		for i, q := range queues {
			o := EnrichOptions{Consumer: fmt.Sprintf("p%d", i), Batch: batch, StaleAfter: time.Minute, Block: 10 * time.Millisecond, Interval: time.Millisecond, Share: 1}
			switch mode {
			case "conversation":
				o.Conversations = q.Leases()
			case "stream":
				o.Lease = q
			}
			stops = append(stops, runEnricher(b, NewEnricher(q, []record.Hook{model}, nil, o)))
		}
		waitFor(b, "the backlog enriched", func() bool {
			n, err := queues[0].Pending(ctx)
			return err == nil && n == 0
		})
		total += time.Since(start)
		for _, stop := range stops {
			stop()
		}
		overlaps += model.overlaps
		calls += model.calls
	}
	b.ReportMetric(float64(b.N*convs*perConv)/total.Seconds(), "exchanges/s")
	b.ReportMetric(float64(calls)/float64(b.N), "calls/op")
	b.ReportMetric(float64(overlaps)/float64(b.N), "overlaps/op")
}
