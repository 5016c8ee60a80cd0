package recall

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/itemindex"
	"github.com/memgate/memgate/internal/memory"
)

// memWindows is an itemindex.Source of windows alone over conversations
// held in memory (ordered by Seq, Seq from 1, none superseded): every
// window is closed but those at a conversation's end.
type memWindows struct {
	itemindex.Source // nil: no items
	convs            map[string][]memory.Message
}

func (memWindows) ItemRevisions(context.Context, string, string) (memory.Revisions, error) {
	return memory.Revisions{}, nil
}

func (src memWindows) ReadWindows(_ context.Context, _, _ string, refs []memory.MessageRef, radius int) (map[itemindex.WindowKey][]memory.Message, map[itemindex.WindowKey]bool, error) {
	read := map[itemindex.WindowKey][]memory.Message{}
	closed := map[itemindex.WindowKey]bool{}
	for _, r := range refs {
		msgs := src.convs[r.Conversation]
		for i, m := range msgs {
			if m.Key != r.Key {
				continue
			}
			k := itemindex.WindowKey{Ref: r, Radius: radius}
			read[k] = append([]memory.Message(nil), msgs[max(0, i-radius):min(len(msgs), i+radius+1)]...)
			closed[k] = i+radius < len(msgs)
		}
	}
	return read, closed, nil
}

// windowsReader is a ContextReader over an itemindex.Index, as the stores
// are.
type windowsReader struct{ w *itemindex.Index }

func (r windowsReader) MessagesAround(ctx context.Context, _ *memory.Revisions, tenant, user string, refs []memory.MessageRef, radius int) ([]*memory.Message, error) {
	return r.w.Around(ctx, memory.Revisions{}, tenant, user, refs, radius)
}

// benchConversation returns a conversation of n turns of realistic length
// (questions of about 100 bytes, answers of 200 to 1,500).
func benchConversation(conv string, n int) []memory.Message {
	r := rand.New(rand.NewPCG(1, 2))
	msgs := make([]memory.Message, n)
	for i := range msgs {
		role, text := "user", fmt.Sprintf("question %d: %s", i, strings.Repeat("how much did I save this month? ", 3))
		if i%2 == 1 {
			role = "assistant"
			text = fmt.Sprintf("answer %d: %s", i, strings.Repeat("You saved R$ 420 so far, 84% of your goal. ", 5+r.IntN(30)))
		}
		msgs[i] = memory.Message{Tenant: "acme", User: "alice", Conversation: conv, Seq: int64(i + 1),
			Key: memory.Key(fmt.Sprintf("ex-%016x", i/2), i%2), Role: role, Content: text}
	}
	return msgs
}

// BenchmarkExpand measures expand over itemindex.Index.Around (warm, from
// memory) for 70 message hits, radius 1, in a 600-turn conversation, as
// recall runs it on a warm conversation; the windows' SQL is left out.
func BenchmarkExpand(b *testing.B) {
	const conv = "conv-7f3a9c1e2b4d5f60718293a4b5c6d7e8"
	msgs := benchConversation(conv, 600)
	w := windowsReader{itemindex.New(memWindows{convs: map[string][]memory.Message{conv: msgs}}, itemindex.DefaultLimits)}
	r := rand.New(rand.NewPCG(5, 6))
	var items []memory.Item
	for len(items) < 70 {
		m := msgs[r.IntN(len(msgs)-1)] // all windows closed
		items = append(items, memory.Item{Tenant: "acme", User: "alice", Conversation: conv, Kind: KindMessage,
			Ref: m.Key, Text: m.Content, Score: 1 / float64(len(items)+1)})
	}
	items = append(items, memory.Item{Kind: KindSummary, Conversation: conv, Ref: conv + ":v1", Text: "a summary", Score: 0.01})
	ctx := context.Background()
	if _, err := expand(ctx, w, nil, "acme", "alice", items, 1, ""); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := expand(ctx, w, nil, "acme", "alice", items, 1, ""); err != nil {
			b.Fatal(err)
		}
	}
}
