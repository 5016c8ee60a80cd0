package sqlite_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
)

// BenchmarkMessagesAround measures the turns around 70 recalled messages
// (radius 1) of a warm 600-message conversation, as recall asks for them
// request after request: the closed windows come from memory, the one at
// the conversation's end is read again.
func BenchmarkMessagesAround(b *testing.B) {
	s, refs := mustAroundCorpus(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		got, err := s.MessagesAround(ctx, nil, "acme", "alice", refs, 1)
		if err != nil || len(got) < 70 {
			b.Fatalf("MessagesAround = %d, %v", len(got), err)
		}
	}
}

// mustAroundCorpus stores a 600-message conversation for acme/alice and
// returns 70 refs to its messages, the last one among them, their windows
// read once.
func mustAroundCorpus(b *testing.B) (*sqlite.Store, []memory.MessageRef) {
	b.Helper()
	s, _ := mustTempStore(b)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "conv-7f3a9c1e2b4d5f60718293a4b5c6d7e8"}
	ctx := context.Background()
	const exchanges = 300
	for i := range exchanges {
		ex := memory.Exchange{ID: fmt.Sprintf("ex-%08x", i), Identity: id, At: time.Now(),
			Turn:  []memory.Message{{Role: "user", Content: fmt.Sprintf("question %d: %s", i, strings.Repeat("how much did I save? ", 4))}},
			Reply: memory.Message{Role: "assistant", Content: fmt.Sprintf("answer %d: %s", i, strings.Repeat("You saved R$ 420 so far, 84%% of your goal. ", 6))}}
		if _, err := s.SaveExchange(ctx, ex); err != nil {
			b.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	refs := []memory.MessageRef{{Conversation: id.Conversation, Key: memory.Key(fmt.Sprintf("ex-%08x", exchanges-1), 1)}}
	for len(refs) < 70 {
		refs = append(refs, memory.MessageRef{Conversation: id.Conversation, Key: memory.Key(fmt.Sprintf("ex-%08x", r.IntN(exchanges)), r.IntN(2))})
	}
	if _, err := s.MessagesAround(ctx, nil, "acme", "alice", refs, 1); err != nil {
		b.Fatal(err)
	}
	return s, refs
}
