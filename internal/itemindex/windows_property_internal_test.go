package itemindex

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// randTurns is a Source of windows alone (no items) over a few
// conversations of numbered turns, some superseded (left out of windows,
// yet closing them), that changes (supersedes, restores, edits, appends)
// when told to, moving Messages on updates and recording the refs it
// reads.
type randTurns struct {
	Source   // nil: no items
	convs    map[string][]randTurn
	messages int64
	read     [][]memory.MessageRef
}

type randTurn struct {
	key, role, content string
	superseded         bool
}

func newRandTurns(r *rand.Rand) *randTurns {
	src := &randTurns{convs: map[string][]randTurn{}}
	for c := range 1 + r.IntN(3) {
		conv := fmt.Sprintf("conv-%d", c)
		for range r.IntN(40) {
			src.append(conv, r.IntN(8) == 0)
		}
	}
	return src
}

func (src *randTurns) append(conv string, superseded bool) {
	i := len(src.convs[conv])
	src.convs[conv] = append(src.convs[conv], randTurn{key: fmt.Sprintf("ex-%d:%d", i/2, i%2),
		role: []string{"user", "assistant"}[i%2], content: fmt.Sprintf("%s turn %d", conv, i), superseded: superseded})
}

// change makes one random change: an update (supersede or restore, and
// edit at times) moves Messages, an insert does not.
func (src *randTurns) change(r *rand.Rand) {
	conv := fmt.Sprintf("conv-%d", r.IntN(len(src.convs)+1))
	n := len(src.convs[conv])
	if n == 0 || r.IntN(3) == 0 {
		src.append(conv, r.IntN(8) == 0)
		return
	}
	t := &src.convs[conv][r.IntN(n)]
	t.superseded = !t.superseded
	if r.IntN(2) == 0 {
		t.content += " (edited)"
	}
	src.messages++
}

// at returns the index of ref's turn, or -1.
func (src *randTurns) at(ref memory.MessageRef) int {
	return slices.IndexFunc(src.convs[ref.Conversation], func(t randTurn) bool { return t.key == ref.Key })
}

// message is turn i of conv as stored.
func (src *randTurns) message(tenant, user, conv string, i int) memory.Message {
	t := src.convs[conv][i]
	return memory.Message{Tenant: tenant, User: user, Conversation: conv, Seq: int64(i + 1), Key: t.key, Role: t.role, Content: t.content}
}

func (src *randTurns) ReadWindows(_ context.Context, tenant, user string, refs []memory.MessageRef, radius int) (map[WindowKey][]memory.Message, map[WindowKey]bool, error) {
	src.read = append(src.read, slices.Clone(refs))
	read := map[WindowKey][]memory.Message{}
	closed := map[WindowKey]bool{}
	for _, ref := range refs {
		turns := src.convs[ref.Conversation]
		at := src.at(ref)
		if at < 0 {
			continue
		}
		k := WindowKey{Ref: ref, Radius: radius}
		read[k] = nil
		for i := max(0, at-radius); i <= min(len(turns)-1, at+radius); i++ {
			if !turns[i].superseded {
				read[k] = append(read[k], src.message(tenant, user, ref.Conversation, i))
			}
		}
		closed[k] = at+radius < len(turns)
	}
	return read, closed, nil
}

// truth is what Around must answer now: the live turns within radius of
// each stored turn refs names, each once, by conversation and Seq.
func (src *randTurns) truth(tenant, user string, refs []memory.MessageRef, radius int) []memory.Message {
	out := []memory.Message{}
	convs := make([]string, 0, len(src.convs))
	for conv := range src.convs {
		convs = append(convs, conv)
	}
	slices.Sort(convs)
	for _, conv := range convs {
		for i, t := range src.convs[conv] {
			near := slices.ContainsFunc(refs, func(r memory.MessageRef) bool {
				at := src.at(r)
				return r.Conversation == conv && at >= 0 && i >= at-radius && i <= at+radius
			})
			if near && !t.superseded && radius >= 0 {
				out = append(out, src.message(tenant, user, conv, i))
			}
		}
	}
	return out
}

// TestAroundProperties asks a Windows over a randomly changing store
// (updates moving Messages, inserts not) for the turns around random refs,
// repeated and unknown ones among them, radius -1 to 2, with a cache that
// evicts and one that does not, and wants every time: the store's live
// turns around the refs now, each once, in order; reads that name each
// ref at most once; and, asked again with nothing changed and nothing
// evicted, a read of only the refs whose windows were open or unknown.
func TestAroundProperties(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 99))
		src := newRandTurns(r)
		limit, evicts := DefaultLimits.Windows, seed%5 == 0
		if evicts {
			limit = 4 << 10
		}
		w := New(src, Limits{Windows: limit})
		for ask := range 20 {
			var refs []memory.MessageRef
			for range r.IntN(30) {
				conv := fmt.Sprintf("conv-%d", r.IntN(len(src.convs)+1))
				i := r.IntN(len(src.convs[conv]) + 2)
				refs = append(refs, memory.MessageRef{Conversation: conv, Key: fmt.Sprintf("ex-%d:%d", i/2, i%2)})
				if r.IntN(4) == 0 {
					refs = append(refs, refs[r.IntN(len(refs))])
				}
			}
			radius := r.IntN(4) - 1
			want := src.truth("t", "u", refs, radius)
			for again := range 2 {
				src.read = nil
				shared, err := w.Around(ctx, memory.Revisions{Messages: src.messages}, "t", "u", refs, radius)
				if err != nil {
					t.Fatal(err)
				}
				got := make([]memory.Message, len(shared))
				for i, m := range shared {
					got[i] = *m
				}
				if !slices.EqualFunc(got, want, func(a, b memory.Message) bool {
					return a.Conversation == b.Conversation && a.Seq == b.Seq && a.Key == b.Key && a.Content == b.Content && a.Role == b.Role
				}) {
					t.Fatalf("seed %d ask %d: Around(%v, %d)\n = %v\nwant %v", seed, ask, refs, radius, got, want)
				}
				for _, read := range src.read {
					if len(read) != len(slices.Compact(slices.SortedFunc(slices.Values(read), cmpRef))) {
						t.Fatalf("seed %d ask %d: read %v names a ref twice", seed, ask, read)
					}
				}
				if again == 0 || evicts {
					continue
				}
				var open []memory.MessageRef
				for _, ref := range refs {
					if at := src.at(ref); radius >= 0 && (at < 0 || at+radius >= len(src.convs[ref.Conversation])) {
						open = append(open, ref)
					}
				}
				var read []memory.MessageRef
				for _, rs := range src.read {
					read = append(read, rs...)
				}
				if !slices.Equal(slices.Compact(slices.SortedFunc(slices.Values(read), cmpRef)), slices.Compact(slices.SortedFunc(slices.Values(open), cmpRef))) {
					t.Fatalf("seed %d ask %d: asked again, read %v; want only the open or unknown %v", seed, ask, read, open)
				}
			}
			for range r.IntN(3) {
				src.change(r)
			}
		}
	}
}

// cmpRef orders refs by conversation and key.
func cmpRef(a, b memory.MessageRef) int {
	return cmp.Or(cmp.Compare(a.Conversation, b.Conversation), cmp.Compare(a.Key, b.Key))
}

// TestMergeWindowsProperties merges random windows, consistent or not
// (windows that disagree on a turn's liveness, out of order, of several
// conversations, one given twice), and wants every turn of every window
// once, ordered by conversation and Seq, pointing into the windows (not
// copied).
func TestMergeWindowsProperties(t *testing.T) {
	msg := func(conv int, seq int64) memory.Message {
		return memory.Message{Conversation: fmt.Sprint("c", conv), Seq: seq, Key: fmt.Sprint("k", seq), Content: fmt.Sprint(conv, "/", seq)}
	}
	type turn struct {
		conv string
		seq  int64
	}
	for seed := range uint64(2000) {
		r := rand.New(rand.NewPCG(seed, 7))
		wins := make([][]memory.Message, r.IntN(12))
		want := map[turn]bool{}
		for i := range wins {
			conv, at := r.IntN(3), int64(r.IntN(30))
			var win []memory.Message
			for s := at - int64(r.IntN(4)); s <= at+int64(r.IntN(4)); s++ {
				if r.IntN(6) != 0 {
					win = append(win, msg(conv, s))
				}
			}
			switch r.IntN(20) {
			case 0:
				r.Shuffle(len(win), func(i, j int) { win[i], win[j] = win[j], win[i] })
			case 1:
				win = append(win, msg(r.IntN(3), int64(r.IntN(30))))
			case 2:
				if i > 0 {
					win = wins[r.IntN(i)]
				}
			}
			wins[i] = win
			for _, m := range win {
				want[turn{m.Conversation, m.Seq}] = true
			}
		}
		merged := mergeWindows(wins)
		if len(merged) != len(want) {
			t.Fatalf("seed %d: %d turns merged, want %d distinct", seed, len(merged), len(want))
		}
		for i, m := range merged {
			if i > 0 && cmpTurn(merged[i-1], m) >= 0 {
				t.Fatalf("seed %d: %s/%d merged after %s/%d", seed, m.Conversation, m.Seq, merged[i-1].Conversation, merged[i-1].Seq)
			}
			if w := msg(int(m.Conversation[1]-'0'), m.Seq); m.Key != w.Key || m.Content != w.Content {
				t.Fatalf("seed %d: turn %+v changed", seed, *m)
			}
			if !slices.ContainsFunc(wins, func(win []memory.Message) bool { return pointsInto(m, win) }) {
				t.Fatalf("seed %d: turn %s/%d is a copy, not the window's", seed, m.Conversation, m.Seq)
			}
		}
	}
}

// cmpTurn orders turns by conversation and Seq.
func cmpTurn(a, b *memory.Message) int {
	return cmp.Or(cmp.Compare(a.Conversation, b.Conversation), cmp.Compare(a.Seq, b.Seq))
}

// pointsInto reports whether m points at one of win's turns.
func pointsInto(m *memory.Message, win []memory.Message) bool {
	for i := range win {
		if m == &win[i] {
			return true
		}
	}
	return false
}

// BenchmarkMergeWindows merges the windows (radius 1) of 70 random hits
// in a 600-turn conversation, as recall asks for them.
func BenchmarkMergeWindows(b *testing.B) {
	const conv = "conv-7f3a9c1e2b4d5f60718293a4b5c6d7e8"
	turns := make([]memory.Message, 600)
	for i := range turns {
		turns[i] = memory.Message{Tenant: "acme", User: "alice", Conversation: fmt.Sprint(conv), Seq: int64(i + 1),
			Key: fmt.Sprintf("ex-%016x:%d", i/2, i%2), Role: "user", Content: "some text"}
	}
	r := rand.New(rand.NewPCG(1, 2))
	wins := make([][]memory.Message, 70)
	for i := range wins {
		at := r.IntN(len(turns))
		wins[i] = slices.Clone(turns[max(0, at-1):min(len(turns), at+2)])
	}
	b.ReportAllocs()
	for b.Loop() {
		mergeWindows(wins)
	}
}
