package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// EraseBenchStore is what SeedBigUser and BenchEraseWhileCapturing need of
// a store.
type EraseBenchStore interface {
	KnowledgeStore
	CaptureStore
}

// SeedBigUser stores n messages of id's user (n/2 exchanges), each of
// words distinct random words and each a recall item, a fact and a
// summary, and returns a word of the user's first message.
func SeedBigUser(tb testing.TB, s EraseBenchStore, id memory.Identity, n, words int) string {
	tb.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	text := func() string {
		ws := make([]string, words)
		for i := range ws {
			b := make([]byte, 8)
			for j := range b {
				b[j] = byte('a' + rng.IntN(26))
			}
			ws[i] = string(b)
		}
		return strings.Join(ws, " ")
	}
	at := time.Now().Add(-time.Hour)
	var exs []memory.Exchange
	var items []memory.Item
	for i := range n / 2 {
		ex := memory.Exchange{ID: fmt.Sprintf("big-%d", i), Identity: id, At: at.Add(time.Duration(i) * time.Millisecond),
			Turn: []memory.Message{{Role: "user", Content: text()}}, Reply: memory.Message{Role: "assistant", Content: text()}}
		exs = append(exs, ex)
		for j, m := range append(ex.Turn, ex.Reply) {
			items = append(items, memory.Item{Tenant: id.Tenant, User: id.User, Conversation: id.Conversation,
				Kind: "message", Ref: memory.Key(ex.ID, j), Text: m.Content})
		}
	}
	for len(exs) > 0 {
		k := min(len(exs), 256)
		if _, err := s.SaveExchanges(ctx, exs[:k]); err != nil {
			tb.Fatalf("SaveExchanges: %v", err)
		}
		exs = exs[k:]
	}
	if err := s.AddItems(ctx, items); err != nil {
		tb.Fatalf("AddItems: %v", err)
	}
	if _, err := s.UpsertFact(ctx, memory.Fact{Tenant: id.Tenant, User: id.User, Type: memory.FactProfile,
		Key: "city", Value: "Porto", Confidence: 0.9}, 0); err != nil {
		tb.Fatalf("UpsertFact: %v", err)
	}
	if err := s.SaveSummary(ctx, memory.Summary{Tenant: id.Tenant, User: id.User, Conversation: id.Conversation,
		Version: 1, FromSeq: 1, ToSeq: 2, Text: "The user lives in Porto"}); err != nil {
		tb.Fatalf("SaveSummary: %v", err)
	}
	if err := s.DeadLetter(ctx, memory.DeadLetter{Exchange: "dead", Identity: id, Reason: "test",
		Payload: []byte(`{"text":"set aside"}`), At: at}); err != nil {
		tb.Fatalf("DeadLetter: %v", err)
	}
	return strings.Fields(items[0].Text)[0]
}

// BenchEraseWhileCapturing erases a user of 2,000 messages of 40
// distinct words each while another tenant captures in a loop, and
// reports the longest a capture waited (the longest the erasure kept
// other tenants' writes out) and the erasure's own time.
func BenchEraseWhileCapturing(b *testing.B, open func(b *testing.B) EraseBenchStore) {
	ctx := context.Background()
	for i := range b.N {
		b.StopTimer()
		s := open(b)
		victim := memory.Identity{Tenant: "tenant-a", User: fmt.Sprintf("alice-%d", i), Conversation: "c1"}
		other := memory.Identity{Tenant: "tenant-b", User: "bob", Conversation: "c1"}
		SeedBigUser(b, s, victim, 2000, 40)
		b.StartTimer()
		done, longest := make(chan struct{}), make(chan time.Duration, 1)
		go func() {
			var worst time.Duration
			if err := CaptureWhile(ctx, s, other, done, func(_ int, took time.Duration) bool {
				worst = max(worst, took)
				return true
			}); err != nil {
				b.Error(err)
			}
			longest <- worst
		}()
		start := time.Now()
		if err := s.DeleteUser(ctx, victim.Tenant, victim.User); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		close(done)
		worst := <-longest
		b.ReportMetric(float64(worst.Microseconds())/1000, "ms-longest-capture-wait")
		b.ReportMetric(float64(took.Microseconds())/1000, "ms-erasure")
		b.Logf("erasure of 2,000 messages: %s; longest capture wait meanwhile: %s", took, worst)
	}
}

// CaptureWhile stores one-turn exchanges of id, one after another, until
// stop is closed or after, handed how many were stored and how long the
// last save took, returns false.
func CaptureWhile(ctx context.Context, s Store, id memory.Identity, stop <-chan struct{}, after func(n int, took time.Duration) bool) error {
	for n := 1; ; n++ {
		select {
		case <-stop:
			return nil
		default:
		}
		start := time.Now()
		if _, err := s.SaveExchange(ctx, memory.Exchange{ID: fmt.Sprintf("capture-%d", n), Identity: id, At: time.Now(),
			Turn: []memory.Message{{Role: "user", Content: "hello"}}, Reply: memory.Message{Role: "assistant", Content: "hi"}}); err != nil {
			return fmt.Errorf("capture %d: %w", n, err)
		}
		if !after(n, time.Since(start)) {
			return nil
		}
	}
}
