package itemindex_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/memgate/memgate/internal/itemindex"
	"github.com/memgate/memgate/internal/memory"
)

// fakeTurns is an itemindex.Source of windows alone (no items) over one
// conversation of n turns, recording the refs it reads. It reports every
// window's closedness, open ones as false.
type fakeTurns struct {
	itemindex.Source // nil: no items
	mu               sync.Mutex
	n                int
	read             []string
}

func (f *fakeTurns) ReadWindows(_ context.Context, tenant, user string, refs []memory.MessageRef, radius int) (map[itemindex.WindowKey][]memory.Message, map[itemindex.WindowKey]bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	read := map[itemindex.WindowKey][]memory.Message{}
	closed := map[itemindex.WindowKey]bool{}
	for _, r := range refs {
		f.read = append(f.read, r.Key)
		var seq int
		if _, err := fmt.Sscanf(r.Key, "k%d", &seq); err != nil {
			return nil, nil, err
		}
		k := itemindex.WindowKey{Ref: r, Radius: radius}
		for s := max(1, seq-radius); s <= min(f.n, seq+radius); s++ {
			read[k] = append(read[k], memory.Message{Tenant: tenant, User: user, Conversation: r.Conversation,
				Seq: int64(s), Key: fmt.Sprint("k", s), Content: fmt.Sprint("turn ", s)})
		}
		closed[k] = seq+radius <= f.n
	}
	return read, closed, nil
}

// TestWindowsKeepOnlyClosedWindows asks twice for the turns around a
// message whose window is closed and one at the conversation's end: the
// second time only the open window is read again, and the answer is the
// same, each turn once, in order.
func TestWindowsKeepOnlyClosedWindows(t *testing.T) {
	ctx := context.Background()
	src := &fakeTurns{n: 6}
	w := itemindex.New(src, itemindex.DefaultLimits)
	refs := []memory.MessageRef{{Conversation: "c", Key: "k2"}, {Conversation: "c", Key: "k6"}, {Conversation: "c", Key: "k2"}}
	for i, wantRead := range [][]string{{"k2", "k6"}, {"k6"}} {
		src.read = nil
		got, err := w.Around(ctx, memory.Revisions{}, "t", "u", refs, 1)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(src.read)
		if !slices.Equal(src.read, wantRead) {
			t.Fatalf("ask %d: read %v, want %v", i+1, src.read, wantRead)
		}
		var seqs []int64
		for _, m := range got {
			seqs = append(seqs, m.Seq)
		}
		if want := []int64{1, 2, 3, 5, 6}; !slices.Equal(seqs, want) {
			t.Fatalf("ask %d: seqs %v, want %v", i+1, seqs, want)
		}
	}
}
