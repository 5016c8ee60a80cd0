package itemindex

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
)

// oldAround is Windows.Around as it was before it merged the windows
// through their first turns (kept to test the new one against).
func oldAround(ctx context.Context, w *Windows, tenant, user string, refs []memory.MessageRef, radius int) ([]memory.Message, error) {
	if len(refs) == 0 || radius < 0 {
		return []memory.Message{}, nil
	}
	rev, err := cache.ReadRevisions(ctx, w.src, tenant, user)
	if err != nil {
		return nil, fmt.Errorf("messages around: read revision: %w", err)
	}
	changed := rev.Messages
	keys := make([]WindowKey, 0, len(refs))
	asked := make(map[WindowKey]bool, len(refs))
	for _, r := range refs {
		if k := (WindowKey{Ref: r, Radius: radius}); !asked[k] {
			asked[k] = true
			keys = append(keys, k)
		}
	}
	got := make(map[WindowKey][]memory.Message, len(keys))
	var missing []WindowKey
	for _, k := range keys {
		if win, ok := w.cache.Get(windowKey{tenant, user, changed, k}); ok {
			got[k] = win
		} else {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		refs := make([]memory.MessageRef, len(missing))
		for i, k := range missing {
			refs[i] = k.Ref
		}
		read, closed, err := w.src.ReadWindows(ctx, tenant, user, refs, radius)
		if err != nil {
			return nil, fmt.Errorf("messages around: %w", err)
		}
		for k, win := range read {
			if asked[k] {
				got[k] = win
			}
		}
		for k, ok := range closed {
			if ok && asked[k] {
				w.cache.Put(windowKey{tenant, user, changed, k}, read[k])
			}
		}
	}
	return oldMergeWindows(got), nil
}

// oldMergeWindows is mergeWindows as it was: every turn sorted.
func oldMergeWindows(got map[WindowKey][]memory.Message) []memory.Message {
	type at struct {
		conversation string
		seq          int64
		m            *memory.Message
	}
	n := 0
	for _, win := range got {
		n += len(win)
	}
	order := make([]at, 0, n)
	for _, win := range got {
		for i := range win {
			order = append(order, at{win[i].Conversation, win[i].Seq, &win[i]})
		}
	}
	slices.SortFunc(order, func(a, b at) int {
		return cmp.Or(cmp.Compare(a.conversation, b.conversation), cmp.Compare(a.seq, b.seq))
	})
	out := make([]memory.Message, 0, len(order))
	for i, a := range order {
		if i > 0 && a.seq == order[i-1].seq && a.conversation == order[i-1].conversation {
			continue
		}
		out = append(out, *a.m)
	}
	return out
}

// randTurns is a WindowSource over a few conversations of numbered turns,
// some superseded (left out of windows, yet closing them), that changes
// (supersedes, restores, appends) when told to, moving Messages on updates.
type randTurns struct {
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
			src.add(r, conv)
		}
	}
	return src
}

func (src *randTurns) add(r *rand.Rand, conv string) {
	src.append(conv, r.IntN(8) == 0)
}

func (src *randTurns) append(conv string, superseded bool) {
	i := len(src.convs[conv])
	src.convs[conv] = append(src.convs[conv], randTurn{key: fmt.Sprintf("ex-%d:%d", i/2, i%2),
		role: []string{"user", "assistant"}[i%2], content: fmt.Sprintf("%s turn %d", conv, i), superseded: superseded})
}

// change makes one random change to each of srcs (copies of one store):
// an update or delete moves Messages, an insert does not.
func change(r *rand.Rand, srcs ...*randTurns) {
	conv := fmt.Sprintf("conv-%d", r.IntN(len(srcs[0].convs)+1))
	n := len(srcs[0].convs[conv])
	insert, superseded, at, edit := n == 0 || r.IntN(3) == 0, r.IntN(8) == 0, r.IntN(max(n, 1)), r.IntN(2) == 0
	for _, src := range srcs {
		if insert {
			src.append(conv, superseded)
			continue
		}
		t := &src.convs[conv][at]
		t.superseded = !t.superseded
		if edit {
			t.content += " (edited)"
		}
		src.messages++
	}
}

// clone returns a copy of src that changes apart from it.
func (src *randTurns) clone() *randTurns {
	c := &randTurns{convs: map[string][]randTurn{}, messages: src.messages}
	for conv, turns := range src.convs {
		c.convs[conv] = slices.Clone(turns)
	}
	return c
}

func (src *randTurns) ItemRevisions(context.Context, string, string) (cache.Revisions, error) {
	return cache.Revisions{Messages: src.messages}, nil
}

func (src *randTurns) ReadWindows(_ context.Context, tenant, user string, refs []memory.MessageRef, radius int) (map[WindowKey][]memory.Message, map[WindowKey]bool, error) {
	src.read = append(src.read, slices.Clone(refs))
	read := map[WindowKey][]memory.Message{}
	closed := map[WindowKey]bool{}
	for _, ref := range refs {
		turns := src.convs[ref.Conversation]
		at := slices.IndexFunc(turns, func(t randTurn) bool { return t.key == ref.Key })
		if at < 0 {
			continue
		}
		k := WindowKey{Ref: ref, Radius: radius}
		read[k] = nil
		for i := max(0, at-radius); i <= min(len(turns)-1, at+radius); i++ {
			if t := turns[i]; !t.superseded {
				read[k] = append(read[k], memory.Message{Tenant: tenant, User: user, Conversation: ref.Conversation,
					Seq: int64(i + 1), Key: t.key, Role: t.role, Content: t.content})
			}
		}
		closed[k] = at+radius < len(turns)
	}
	return read, closed, nil
}

// TestAroundMatchesOldAround asks a Windows and the algorithm it replaced
// (each over its own copy of a randomly changing store) for the turns
// around random refs, repeated and unknown ones among them, and wants the
// same turns every time, and the same reads of the store when nothing is
// evicted.
func TestAroundMatchesOldAround(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 99))
		oldSrc := newRandTurns(r)
		newSrc := oldSrc.clone()
		max := DefaultWindowBytes
		if seed%5 == 0 {
			max = 4 << 10 // evicts
		}
		oldW, newW := NewWindows(oldSrc, max), NewWindows(newSrc, max)
		for ask := range 20 {
			var refs []memory.MessageRef
			for range r.IntN(30) {
				conv := fmt.Sprintf("conv-%d", r.IntN(len(oldSrc.convs)+1))
				n := len(oldSrc.convs[conv])
				i := r.IntN(n + 2)
				refs = append(refs, memory.MessageRef{Conversation: conv, Key: fmt.Sprintf("ex-%d:%d", i/2, i%2)})
				if r.IntN(4) == 0 {
					refs = append(refs, refs[r.IntN(len(refs))])
				}
			}
			radius := r.IntN(4) - 1
			oldSrc.read, newSrc.read = nil, nil
			want, err := oldAround(ctx, oldW, "t", "u", refs, radius)
			if err != nil {
				t.Fatal(err)
			}
			shared, err := newW.Around(ctx, "t", "u", refs, radius)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]memory.Message, len(shared))
			for i, m := range shared {
				got[i] = *m
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d ask %d: Around(%v, %d)\n = %v\nwant %v", seed, ask, refs, radius, got, want)
			}
			// Past a bound, which windows stay differs: the old cache
			// dropped a user's windows whole, the new one evicts window
			// by window, and so reads less.
			if evicts := max < DefaultWindowBytes; !evicts && !reflect.DeepEqual(newSrc.read, oldSrc.read) {
				t.Fatalf("seed %d ask %d: read %v, want %v", seed, ask, newSrc.read, oldSrc.read)
			}
			for range r.IntN(3) {
				change(r, oldSrc, newSrc)
			}
		}
	}
}

// TestMergeWindowsMatchesSort merges random windows, consistent or not
// (windows that disagree on a turn's liveness, out of order, of several
// conversations), and wants what sorting every turn gives.
func TestMergeWindowsMatchesSort(t *testing.T) {
	for seed := range uint64(2000) {
		r := rand.New(rand.NewPCG(seed, 7))
		msg := func(conv int, seq int64) memory.Message {
			return memory.Message{Conversation: fmt.Sprint("c", conv), Seq: seq, Key: fmt.Sprint("k", seq), Content: fmt.Sprint(conv, "/", seq)}
		}
		wins := make([][]memory.Message, r.IntN(12))
		got := map[WindowKey][]memory.Message{}
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
			got[WindowKey{Ref: memory.MessageRef{Key: fmt.Sprint(i)}}] = win
		}
		var merged []memory.Message
		for _, m := range mergeWindows(wins) {
			merged = append(merged, *m)
		}
		if want := oldMergeWindows(got); !reflect.DeepEqual(merged, want) && !(len(merged) == 0 && len(want) == 0) {
			t.Fatalf("seed %d: mergeWindows(%v)\n = %v\nwant %v", seed, wins, merged, want)
		}
	}
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
