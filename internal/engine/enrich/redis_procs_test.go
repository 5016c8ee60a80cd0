package enrich

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/postgres"
	redisstore "github.com/memgate/memgate/internal/store/redis"
	"github.com/memgate/memgate/internal/testenv"
)

// Many gateways and `gateway worker` processes share PostgreSQL and the
// Redis enrichment stream, each running an Enricher. A redisProc in a test
// stands in for one: its own PostgreSQL pool, its own Redis client, its own
// Queue values over the shared stream.

// redisProc is one process of the PostgreSQL + Redis topology.
type redisProc struct {
	pg     *postgres.Store
	enrich *watchedQueue
	leases *redisstore.Leases // the enrichment queue's conversation leases
}

// mustRedisProc opens a process on the database at pgURL and the Redis
// keys under prefix, as the gateway's wiring does.
func mustRedisProc(tb testing.TB, pgURL, prefix string) *redisProc {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pg, err := postgres.Open(ctx, pgURL, nil)
	if err != nil {
		tb.Fatalf("open postgres: %v", err)
	}
	tb.Cleanup(func() { _ = pg.Close() })
	rdb, err := redisstore.NewClient(testenv.RedisURL(tb))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = rdb.Close() })
	q, err := redisstore.NewQueue(ctx, rdb, redisstore.QueueConfig{Prefix: prefix})
	if err != nil {
		tb.Fatalf("capture queue: %v", err)
	}
	eq, err := q.Sibling(ctx, "enrich")
	if err != nil {
		tb.Fatalf("enrichment queue: %v", err)
	}
	return &redisProc{pg: pg, enrich: &watchedQueue{Queue: eq}, leases: eq.Leases()}
}

// twoRedisProcs opens two processes over one fresh database and one fresh
// set of Redis keys.
func twoRedisProcs(tb testing.TB) (a, b *redisProc) {
	tb.Helper()
	url, prefix := testenv.PostgresURL(tb), testenv.RedisPrefix(tb)
	return mustRedisProc(tb, url, prefix), mustRedisProc(tb, url, prefix)
}

// redisEnrichOptions returns o as the gateway wires an Enricher over the
// Redis enrichment queue of p, under consumer: with its conversation
// leases.
func redisEnrichOptions(o EnrichOptions, p *redisProc, consumer string) EnrichOptions {
	o.Consumer = consumer
	o.Conversations = p.leases
	return o
}

// watchedQueue is a process's enrichment queue that counts the claims its
// Enricher makes once armed.
type watchedQueue struct {
	*redisstore.Queue
	callWatch
}

func (q *watchedQueue) Claim(ctx context.Context, consumer string, max int, staleAfter, block time.Duration) ([]memory.Delivery, error) {
	q.note()
	return q.Queue.Claim(ctx, consumer, max, staleAfter, block)
}

// pgCompactor is the compactor a process runs over its PostgreSQL store,
// with the extractive summariser (which pins "I live in …") unless model
// is given.
func pgCompactor(st *postgres.Store, model Summarizer, maxMessages, keep int) *Compactor {
	if model == nil {
		model = NewExtractive(wordCounter{}.Text2)
	}
	return New(st, st, nil, model, wordCounter{}, Options{
		RecentTokens: 100000, HighWatermark: 0.9, LowWatermark: 0.4, MaxMessages: maxMessages, KeepMessages: keep,
		MaxSummaryTokens: 50, MaxFacts: 100,
	}, nil)
}

// drained waits until nothing is queued or claimed on p's enrichment queue.
func drained(tb testing.TB, p *redisProc) {
	tb.Helper()
	waitFor(tb, "the enrichment queue drained", func() bool {
		n, err := p.enrich.Pending(context.Background())
		return err == nil && n == 0
	})
}

// TestRedisTwoEnrichersEnrichOnce: two processes enrich from one Redis
// stream into one PostgreSQL database. Process A claims a stored exchange
// ("I live in Lisbon.") and its round runs long (a slow model), past
// StaleAfter. Process B must not reclaim it and enrich it again: the
// user's pinned city would be counted as stated twice (mentions 2,
// confidence raised). The exchange is enriched once.
func TestRedisTwoEnrichersEnrichOnce(t *testing.T) {
	ctx := context.Background()
	pa, pb := twoRedisProcs(t)
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "c"}
	ex := memory.Exchange{ID: record.NewExchangeID(), Identity: id, At: time.Now().UTC(),
		Turn: []memory.Message{{Role: "user", Content: "I live in Lisbon."}}, Reply: memory.Message{Role: "assistant", Content: "Noted."}}
	saveForEnrichment(t, pa.pg, pa.enrich, ex)

	opts := EnrichOptions{StaleAfter: 50 * time.Millisecond, Block: 10 * time.Millisecond, Interval: time.Millisecond}
	gateA, gateB := newGateHook(), newGateHook()
	close(gateB.release)
	runEnricher(t, NewEnricher(pa.enrich, []record.Hook{pgCompactor(pa.pg, nil, 1000, 500), gateA}, nil, redisEnrichOptions(opts, pa, "a")))
	gateA.reached(t, "process A to enrich the exchange")
	// A's claim is older than StaleAfter from here on.
	time.Sleep(opts.StaleAfter)
	pb.enrich.armed.Store(true)
	runEnricher(t, NewEnricher(pb.enrich, []record.Hook{pgCompactor(pb.pg, nil, 1000, 500), gateB}, nil, redisEnrichOptions(opts, pb, "b")))
	waitFor(t, "process B to enrich the exchange again, or to claim 5 times", func() bool {
		return gateB.saw() > 0 || pb.enrich.calls.Load() >= 5
	})
	close(gateA.release)
	drained(t, pa)

	if n := gateB.saw(); n != 0 {
		t.Errorf("process B enriched %d exchanges A was enriching", n)
	}
	facts, err := pa.pg.Facts(ctx, id.Tenant, id.User, time.Now(), false)
	if err != nil {
		t.Fatal(err)
	}
	if len(facts) != 1 || facts[0].Value != "Lisbon" || facts[0].Mentions != 1 {
		t.Fatalf("facts = %+v, want the city Lisbon stated once", facts)
	}
}

// TestRedisTwoEnrichersCompactOnce: two processes enrich from one Redis
// stream into one PostgreSQL database. Process A's round compacts a long
// conversation and waits on a slow side model; meanwhile the
// conversation's next turn is stored and queued, and process B claims it.
// B must not compact the conversation alongside A, from the same state:
// it would pay the model for the summary version A is writing and throw
// one of them away. Each version is summarised once, and B enriches the
// turn once A is done.
func TestRedisTwoEnrichersCompactOnce(t *testing.T) {
	ctx := context.Background()
	pa, pb := twoRedisProcs(t)
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "c"}
	at := time.Now().Add(-time.Hour).UTC()
	turn := 0
	enqueue := func() {
		t.Helper()
		turn++
		ex := memory.Exchange{ID: record.NewExchangeID(), Identity: id, At: at.Add(time.Duration(turn) * time.Minute),
			Turn:  []memory.Message{{Role: "user", Content: fmt.Sprintf("We hang lantern number %d.", turn)}},
			Reply: memory.Message{Role: "assistant", Content: "Nice."}}
		saveForEnrichment(t, pa.pg, pa.enrich, ex)
	}
	for range 4 {
		enqueue()
	}
	model := &billedSummarizer{gate: newGate(), calls: map[int]int{}}
	opts := EnrichOptions{StaleAfter: time.Hour, Block: 10 * time.Millisecond, Interval: time.Millisecond}
	runEnricher(t, NewEnricher(pa.enrich, []record.Hook{pgCompactor(pa.pg, model, 4, 2)}, nil, redisEnrichOptions(opts, pa, "a")))
	model.reached(t, "process A to compact the conversation")
	runEnricher(t, NewEnricher(pb.enrich, []record.Hook{pgCompactor(pb.pg, model, 4, 2)}, nil, redisEnrichOptions(opts, pb, "b")))
	enqueue()
	pb.enrich.armed.Store(true)
	waitFor(t, "process B to compact the conversation too, or to claim 5 times", func() bool {
		return model.billed()[1] > 1 || pb.enrich.calls.Load() >= 5
	})
	close(model.release)
	drained(t, pa)
	for version, n := range model.billed() {
		if n != 1 {
			t.Errorf("summary version %d was asked of the model %d times, want once", version, n)
		}
	}
	if sum, err := pa.pg.LatestSummary(ctx, id); err != nil || sum.Version < 1 {
		t.Fatalf("latest summary = %+v, %v; want the conversation compacted", sum, err)
	}
}

// cutLeases are a process's conversation leases that fail once cut, as
// when the process loses Redis while its round runs (a network partition,
// a long pause).
type cutLeases struct {
	ConversationLeases
	cut atomic.Bool
}

func (l *cutLeases) Lease(ctx context.Context, holder string, ttl time.Duration, keys ...string) ([]bool, error) {
	if l.cut.Load() {
		return nil, fmt.Errorf("redis: lease keys: %w", memory.ErrUnavailable)
	}
	return l.ConversationLeases.Lease(ctx, holder, ttl, keys...)
}

// gatedEnricher returns process p's enricher "a", with leases of 3s that
// fail once cut, whose hooks wait at gate and then compact: once
// released, its compactor writes the city unless its round is fenced.
// The lease is long enough that a busy machine's pause of a second or so
// does not make the fence stop the round before the test cuts the
// leases: renewed every quarter of it, the round is fenced three
// quarters of it after the last renewal.
func gatedEnricher(p *redisProc, opts EnrichOptions, gate *gateHook) (*Enricher, *cutLeases) {
	o := redisEnrichOptions(opts, p, "a")
	leases := &cutLeases{ConversationLeases: o.Conversations}
	o.Conversations = leases
	e := NewEnricher(p.enrich, []record.Hook{gate, pgCompactor(p.pg, nil, 1000, 500)}, nil, o)
	e.leaseTTL = 3 * time.Second
	return e, leases
}

// stated returns the user's current facts, failing the test on an error.
func stated(tb testing.TB, p *redisProc, id memory.Identity) []memory.Fact {
	tb.Helper()
	facts, err := p.pg.Facts(context.Background(), id.Tenant, id.User, time.Now(), false)
	if err != nil {
		tb.Fatal(err)
	}
	return facts
}

// lisbonOnce fails tb unless the user's one current fact is the city
// Lisbon, stated once.
func lisbonOnce(tb testing.TB, p *redisProc, id memory.Identity) {
	tb.Helper()
	if facts := stated(tb, p, id); len(facts) != 1 || facts[0].Value != "Lisbon" || facts[0].Mentions != 1 {
		tb.Fatalf("facts = %+v, want the city Lisbon stated once", facts)
	}
}

// livesInLisbon stores the exchange "I live in Lisbon." and queues it on
// p's enrichment queue.
func livesInLisbon(tb testing.TB, p *redisProc, id memory.Identity) {
	tb.Helper()
	t := tb.(*testing.T)
	saveForEnrichment(t, p.pg, p.enrich, memory.Exchange{ID: record.NewExchangeID(), Identity: id, At: time.Now().UTC(),
		Turn: []memory.Message{{Role: "user", Content: "I live in Lisbon."}}, Reply: memory.Message{Role: "assistant", Content: "Noted."}})
}

// TestRedisEnricherThatLosesItsLeaseStopsWriting: process A's round runs
// long and A loses Redis meanwhile, so it cannot renew its conversation's
// lease, which runs out; process B reclaims the exchange, takes the lease
// and enriches it. A's round, when it goes on, must write nothing more:
// its hooks' context ended before the lease could run out, so the city
// is counted as stated once, by B.
func TestRedisEnricherThatLosesItsLeaseStopsWriting(t *testing.T) {
	pa, pb := twoRedisProcs(t)
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "c"}
	livesInLisbon(t, pa, id)

	opts := EnrichOptions{StaleAfter: 400 * time.Millisecond, Block: 10 * time.Millisecond, Interval: time.Millisecond}
	gateA := newGateHook()
	ea, leasesA := gatedEnricher(pa, opts, gateA)
	eb := NewEnricher(pb.enrich, []record.Hook{pgCompactor(pb.pg, nil, 1000, 500)}, nil, redisEnrichOptions(opts, pb, "b"))
	eb.leaseTTL = ea.leaseTTL
	runEnricher(t, ea)
	gateA.reached(t, "process A to enrich the exchange")
	leasesA.cut.Store(true)
	runEnricher(t, eb)
	waitFor(t, "process B to enrich the exchange once A's lease ran out", func() bool {
		return len(stated(t, pb, id)) > 0
	})
	close(gateA.release)
	waitFor(t, "process A's round to end", func() bool { return value(t, ea.failures.WithLabelValues("lease_lost")) >= 1 })
	drained(t, pa)
	lisbonOnce(t, pa, id)
	if n := value(t, ea.failures.WithLabelValues("lease_lost")); n != 1 {
		t.Errorf("process A counted %v rounds with their lease lost, want 1", n)
	}
}

// TestRedisCrashedEnrichersLeaseRunsOut: a process claimed an exchange and
// took its conversation's lease, then crashed: it neither renews the lease
// nor acknowledges the entry. Once the lease runs out, another process
// reclaims the exchange and enriches it, once.
func TestRedisCrashedEnrichersLeaseRunsOut(t *testing.T) {
	ctx := context.Background()
	pa, pb := twoRedisProcs(t)
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "c"}
	livesInLisbon(t, pa, id)
	if held, err := pa.leases.Lease(ctx, "crashed", 300*time.Millisecond, conversationKey(id)); err != nil || !held[0] {
		t.Fatalf("the crashed process's lease: held %v, %v", held, err)
	}
	if ds, err := pa.enrich.Claim(ctx, "crashed", 10, time.Hour, 0); err != nil || len(ds) != 1 {
		t.Fatalf("the crashed process's claim: %d entries, %v", len(ds), err)
	}
	opts := EnrichOptions{StaleAfter: 100 * time.Millisecond, Block: 10 * time.Millisecond, Interval: time.Millisecond}
	runEnricher(t, NewEnricher(pb.enrich, []record.Hook{pgCompactor(pb.pg, nil, 1000, 500)}, nil, redisEnrichOptions(opts, pb, "b")))
	drained(t, pb)
	lisbonOnce(t, pb, id)
}

// TestRedisEnrichersShareTheWork: the leases are per conversation, so a
// process's long round in one conversation (a slow side model) holds up
// no other: another process enriches another conversation meanwhile, as
// it would with no lease at all.
func TestRedisEnrichersShareTheWork(t *testing.T) {
	pa, pb := twoRedisProcs(t)
	slow := memory.Identity{Tenant: "t", User: "u", Conversation: "slow"}
	at := time.Now().Add(-time.Hour).UTC()
	for i := range 4 {
		saveForEnrichment(t, pa.pg, pa.enrich, memory.Exchange{ID: record.NewExchangeID(), Identity: slow, At: at.Add(time.Duration(i) * time.Minute),
			Turn:  []memory.Message{{Role: "user", Content: fmt.Sprintf("We hang lantern number %d.", i)}},
			Reply: memory.Message{Role: "assistant", Content: "Nice."}})
	}
	model := &billedSummarizer{gate: newGate(), calls: map[int]int{}}
	defer close(model.release)
	opts := EnrichOptions{StaleAfter: time.Hour, Block: 10 * time.Millisecond, Interval: time.Millisecond}
	runEnricher(t, NewEnricher(pa.enrich, []record.Hook{pgCompactor(pa.pg, model, 4, 2)}, nil, redisEnrichOptions(opts, pa, "a")))
	model.reached(t, "process A to compact the slow conversation")
	seen := newGateHook()
	close(seen.release)
	runEnricher(t, NewEnricher(pb.enrich, []record.Hook{seen}, nil, redisEnrichOptions(opts, pb, "b")))
	livesInLisbon(t, pa, memory.Identity{Tenant: "t", User: "u", Conversation: "other"})
	waitFor(t, "process B to enrich the other conversation while A's round runs", func() bool { return seen.saw() == 1 })
}

// cutAcks is a process's enrichment queue that cannot acknowledge once
// cut, as when the process loses Redis after its round's writes.
type cutAcks struct {
	*watchedQueue
	cut atomic.Bool
}

func (q *cutAcks) Ack(ctx context.Context, ids ...string) error {
	if q.cut.Load() {
		return fmt.Errorf("redis: ack: %w", memory.ErrUnavailable)
	}
	return q.watchedQueue.Ack(ctx, ids...)
}

// TestRedisUnacknowledgedRoundIsRedoneUnchanged: process A enriches an
// exchange ("I live in Lisbon.") and then cannot acknowledge it: it lost
// Redis between its writes and its ack. Process B reclaims the entry once
// it is stale and enriches the exchange again. The city stays stated once
// (mentions 1): a redelivered exchange changes nothing.
func TestRedisUnacknowledgedRoundIsRedoneUnchanged(t *testing.T) {
	pa, pb := twoRedisProcs(t)
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "c"}
	livesInLisbon(t, pa, id)

	opts := EnrichOptions{StaleAfter: 50 * time.Millisecond, Block: 10 * time.Millisecond, Interval: time.Millisecond}
	qa := &cutAcks{watchedQueue: pa.enrich}
	qa.cut.Store(true)
	ea := NewEnricher(qa, []record.Hook{pgCompactor(pa.pg, nil, 1000, 500)}, nil, redisEnrichOptions(opts, pa, "a"))
	stopA := runEnricher(t, ea)
	waitFor(t, "process A to fail to acknowledge its round", func() bool { return value(t, ea.failures.WithLabelValues("ack")) >= 1 })
	stopA()
	eb := NewEnricher(pb.enrich, []record.Hook{pgCompactor(pb.pg, nil, 1000, 500)}, nil, redisEnrichOptions(opts, pb, "b"))
	runEnricher(t, eb)
	drained(t, pb)
	if n := value(t, eb.enriched); n != 1 {
		t.Fatalf("process B enriched %v exchanges, want the one A left unacknowledged", n)
	}
	lisbonOnce(t, pb, id)
}

// TestRedisLeaseLostRoundIsEnrichedLater: process A's round loses its
// conversation's lease before its hooks wrote anything (A lost Redis, and
// the lease ran out meanwhile); its hooks are fenced and write nothing.
// The exchange must not be dropped: it is left unacknowledged and
// enriched later, once.
func TestRedisLeaseLostRoundIsEnrichedLater(t *testing.T) {
	ctx := context.Background()
	pa, _ := twoRedisProcs(t)
	id := memory.Identity{Tenant: "t", User: "u", Conversation: "c"}
	livesInLisbon(t, pa, id)

	opts := EnrichOptions{StaleAfter: 200 * time.Millisecond, Block: 10 * time.Millisecond, Interval: time.Millisecond}
	gateA := newGateHook()
	ea, leasesA := gatedEnricher(pa, opts, gateA)
	runEnricher(t, ea)
	gateA.reached(t, "process A to enrich the exchange")
	leasesA.cut.Store(true)
	waitFor(t, "process A's lease to run out", func() bool {
		held, err := pa.leases.Lease(ctx, "probe", time.Minute, conversationKey(id))
		return err == nil && held[0]
	})
	if err := pa.leases.Release(ctx, "probe", conversationKey(id)); err != nil {
		t.Fatal(err)
	}
	leasesA.cut.Store(false)
	close(gateA.release)
	waitFor(t, "process A's round to end", func() bool { return value(t, ea.failures.WithLabelValues("lease_lost")) >= 1 })
	drained(t, pa)
	lisbonOnce(t, pa, id)
}
