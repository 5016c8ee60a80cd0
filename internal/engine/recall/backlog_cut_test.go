package recall

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/memgate/memgate/internal/memory"
)

// nonSpace returns s without its white space: the words and marks a
// message's chunks must hold once each, in order.
func nonSpace(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}

// A round of the index backlog cuts about what it indexes, not the whole
// message again: draining the backlog of a huge message cuts each of its
// chunks about once, where rounds that re-cut the message from its start
// to find where they left off cut it whole once a round (quadratic in its
// length: 13 rounds of 1.5 MB here). The chunks written cover the
// message's text once, in order, without a gap or an overlap, whether it
// is cut as Chunk cuts it or in runs of the embedder's window first.
func TestBacklogRoundsCutOnlyWhatTheyIndex(t *testing.T) {
	huge := randomWords(7, 1500<<10) + " The last word is " + marker(1) + "."
	tests := []struct {
		name string
		w    *Window
	}{
		{name: "cut as Chunk", w: nil},
		{name: "in runs of the window first", w: &Window{Pieces: wordPieces(1), Max: 128}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st := newFakeStore()
			id := memory.Identity{Tenant: "t", User: "u", Conversation: "c"}
			ex := memory.Exchange{ID: "e1", Identity: id, At: time.Now(),
				Turn:  []memory.Message{{Role: "user", Content: huge}},
				Reply: memory.Message{Role: "assistant", Content: "Read it."}}
			st.messages["t/u/c"] = []memory.Message{
				{Key: memory.Key(ex.ID, 0), Role: "user", Content: huge},
				{Key: memory.Key(ex.ID, 1), Role: "assistant", Content: "Read it."},
			}
			ix := NewIndexer(st, NewLocal(16), nil)
			ix.Window = tc.w
			if err := ix.AfterSave(ctx, ex, memory.SaveResult{Inserted: 2}); err != nil {
				t.Fatal(err)
			}
			all, _ := tc.w.chunks(huge)
			rounds := 0
			for ; ; rounds++ {
				if rounds == 1000 {
					t.Fatal("the idle work still reports work after 1000 rounds")
				}
				n, err := ix.IndexBacklog(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					break
				}
			}
			if rounds < 5 {
				t.Fatalf("the backlog took %d rounds: the test proves nothing", rounds)
			}
			cut := ix.backlogCut.Load()
			t.Logf("%d rounds cut %d chunks of a message of %d", rounds, cut, len(all))
			if cut > int64(2*len(all)) {
				t.Fatalf("%d rounds cut %d chunks of a message of %d: want at most twice its chunks", rounds, cut, len(all))
			}
			var items []memory.Item
			for _, it := range st.items {
				if it.Kind == KindMessage && it.Ref == memory.Key(ex.ID, 0) {
					items = append(items, it)
				}
			}
			slices.SortFunc(items, func(a, b memory.Item) int { return a.Chunk - b.Chunk })
			var got strings.Builder
			for i, it := range items {
				if it.Chunk != i {
					t.Fatalf("chunk %d written as chunk %d: a gap or a duplicate", i, it.Chunk)
				}
				got.WriteString(nonSpace(it.Text))
			}
			if got.String() != nonSpace(huge) {
				t.Fatalf("the %d chunks written hold %d bytes of the message's %d (without spaces), or not in order",
					len(items), got.Len(), len(nonSpace(huge)))
			}
		})
	}
}

// A cut resumed at a message's k-th chunk cuts the chunks Window.chunks
// cuts from there, whatever its windows; an entry recorded without its
// offset resumes where one recorded with it does; and every word from
// the resume point on is cut once, in order.
func TestResumedCutCutsOnAsTheWholeCut(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 120<<10; i++ {
		switch i % 7 {
		case 3:
			b.WriteString(strings.ReplaceAll(randomWords(uint64(i), 3000), ".", "") + "\n") // a sentence longer than a chunk
		case 5:
			b.WriteString("Ça coûte 5.000 € — à peine! ")
		default:
			b.WriteString(randomWords(uint64(i), 200) + ". ")
		}
	}
	text := b.String()
	for _, w := range []*Window{nil, {Pieces: wordPieces(1), Max: 128}} {
		all, embedded := w.chunks(text)
		ends := chunkEnds(strings.TrimSpace(text), all)
		for _, k := range []int{0, 1, 7, embedded - 1, embedded, embedded + 1, len(all) / 2, len(all) - 1, len(all)} {
			off := 0
			if k > 0 {
				off = ends[k-1]
			}
			for _, at := range []int{off, 0} { // 0: recorded without its offset
				c := w.resume(text, k, at)
				var got []string
				emb := 0
				for {
					cs, e := c.next()
					if len(cs) == 0 {
						break
					}
					if emb == len(got) {
						emb += e
					}
					got = append(got, cs...)
				}
				name := fmt.Sprintf("window %v, from chunk %d of %d, offset %d", w != nil, k, len(all), at)
				if nonSpace(strings.Join(got, "")) != nonSpace(strings.TrimSpace(text)[off:]) {
					t.Fatalf("%s: the chunks cut do not hold the text from the offset on, once, in order", name)
				}
				// Past the runs, the chunks are those of the whole cut; in
				// the runs, up to the sentence the last run ends in.
				same := len(all) - k
				if w != nil && k < embedded {
					same = embedded - k
				}
				if len(got) < same || !slices.Equal(got[:same], all[k:k+same]) {
					t.Fatalf("%s: the first %d chunks differ from the whole cut's", name, same)
				}
				if wantEmb := max(0, min(embedded-k, len(got))); emb != wantEmb {
					t.Fatalf("%s: %d chunks embedded, want %d", name, emb, wantEmb)
				}
			}
		}
	}
}
