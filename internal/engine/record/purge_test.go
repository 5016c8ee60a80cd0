package record

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// TestPurgeErasedVoidsWhatTheStoreWouldRefuse: an erasure purges from the
// capture and enrichment queues exactly the user's exchanges dated at or
// before it (and undated ones), in the format of each queue, whatever the
// user id holds; the same user of another tenant, other users (even one
// whose text names the erased user), turns after the erasure and entries
// that do not decode stay.
func TestPurgeErasedVoidsWhatTheStoreWouldRefuse(t *testing.T) {
	erasedAt := time.Date(2025, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, user := range []string{"alice", `a"l<i>c\e&`} {
		t.Run(user, func(t *testing.T) {
			ex := func(name, tenant, who string, at time.Time) memory.Exchange {
				e := exchange(t, name, "I am "+user, "Noted")
				e.Tenant, e.User, e.At = tenant, who, at
				return e
			}
			before, after := erasedAt.Add(-time.Hour), erasedAt.Add(time.Second)
			exs := []memory.Exchange{
				ex("gone-before", "acme", user, before),
				ex("gone-at", "acme", user, erasedAt),
				ex("gone-undated", "acme", user, time.Time{}),
				ex("kept-after", "acme", user, after),
				ex("kept-tenant", "other", user, before),
				ex("kept-bob", "acme", "bob", before), // says "I am <user>"
			}
			capture, enrich := NewMemoryQueue(0), NewMemoryQueue(0)
			for _, e := range exs {
				b, err := json.Marshal(e)
				if err != nil {
					t.Fatal(err)
				}
				p, err := EncodeEnrichment(e, memory.SaveResult{Inserted: 2})
				if err != nil {
					t.Fatal(err)
				}
				if err := capture.Enqueue(context.Background(), b); err != nil {
					t.Fatal(err)
				}
				if err := enrich.Enqueue(context.Background(), p); err != nil {
					t.Fatal(err)
				}
			}
			junk := []byte(`{"Tenant":"acme","User":` + string(must(json.Marshal(user))) + `,"at":`)
			for _, q := range []*MemoryQueue{capture, enrich} {
				if err := q.Enqueue(context.Background(), junk); err != nil {
					t.Fatal(err)
				}
			}
			c := mustCapturer(t, capture, newFakeSaver(), nil, Options{Enrich: enrich})
			n := c.PurgeErased(context.Background(), "acme", user, erasedAt)
			if n != (Purged{Turns: 3, Enrichments: 3}) {
				t.Fatalf("PurgeErased = %+v; want 3 entries of each queue, done", n)
			}
			for name, q := range map[string]*MemoryQueue{"capture": capture, "enrichment": enrich} {
				ds, err := q.Claim(context.Background(), "w", 100, time.Hour, 0)
				if err != nil {
					t.Fatal(err)
				}
				var left []string
				for _, d := range ds {
					var id string
					if name == "capture" {
						var e memory.Exchange
						_ = json.Unmarshal(d.Payload, &e)
						id = e.ID
					} else if en, err := DecodeEnrichment(d.Payload); err == nil {
						id = en.Exchange.ID
					}
					left = append(left, id)
				}
				if want := []string{"kept-after", "kept-tenant", "kept-bob", ""}; !slices.Equal(left, want) {
					t.Errorf("%s queue after the purge holds %q, want %q", name, left, want)
				}
			}
			if n := c.PurgeErased(context.Background(), "acme", user, time.Time{}); n != (Purged{}) {
				t.Fatalf("PurgeErased of a user never erased = %+v; want nothing", n)
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// scrubLog records, at each Scrub, how many entries the queue it watches
// still held.
type scrubLog struct {
	q     *MemoryQueue
	held  []int64
	calls int
}

func (s *scrubLog) Scrub() {
	n, _ := s.q.Pending(context.Background())
	s.held = append(s.held, n)
	s.calls++
}

// TestPurgeTellsTheScrubberOnceBothQueuesAreDone: an erasure's or a
// deletion's purge tells Options.Scrubber once, after the enrichment queue
// (purged last) no longer holds what it voids, and also when it removed
// nothing (the queues' copies elsewhere hold processed exchanges too); an
// erasure that never happened does not.
func TestPurgeTellsTheScrubberOnceBothQueuesAreDone(t *testing.T) {
	ctx := context.Background()
	erasedAt := time.Now()
	e := exchange(t, "gone", "my code word", "Noted")
	e.Tenant, e.User, e.Conversation, e.At = "acme", "alice", "c1", erasedAt.Add(-time.Hour)
	p, err := EncodeEnrichment(e, memory.SaveResult{Inserted: 2})
	if err != nil {
		t.Fatal(err)
	}
	capture, enrich := NewMemoryQueue(0), NewMemoryQueue(0)
	if err := enrich.Enqueue(ctx, p); err != nil {
		t.Fatal(err)
	}
	scrub := &scrubLog{q: enrich}
	c := mustCapturer(t, capture, newFakeSaver(), nil, Options{Enrich: enrich, Scrubber: scrub})
	if n := c.PurgeErased(ctx, "acme", "alice", time.Time{}); n != (Purged{}) || scrub.calls != 0 {
		t.Fatalf("PurgeErased of a user never erased = %+v, %d scrubs; want nothing", n, scrub.calls)
	}
	if n := c.PurgeErased(ctx, "acme", "alice", erasedAt); n != (Purged{Enrichments: 1}) {
		t.Fatalf("PurgeErased = %+v; want the enrichment entry", n)
	}
	if !slices.Equal(scrub.held, []int64{0}) {
		t.Fatalf("scrubs saw the enrichment queue hold %v entries; want one scrub, after the purge", scrub.held)
	}
	if n := c.PurgeErased(ctx, "acme", "alice", erasedAt); n.Pending || scrub.calls != 2 {
		t.Fatalf("a purge that removed nothing: %+v, %d scrubs in all; want 2", n, scrub.calls)
	}
	if n := c.PurgeDeleted(ctx, e.Identity, erasedAt); n.Pending || scrub.calls != 3 {
		t.Fatalf("a conversation's purge: %+v, %d scrubs in all; want 3", n, scrub.calls)
	}
}
