package recall

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/ranking"
)

// randomWords returns about size bytes of distinct random lowercase words
// with a sentence end every fifteen, seeded by seed: the text that costs a
// full-text index most per byte (a new term for nearly every word).
func randomWords(seed uint64, size int) string {
	r := rand.New(rand.NewPCG(seed, seed))
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		for range 3 + r.IntN(8) {
			b.WriteByte(byte('a' + r.IntN(26)))
		}
		if i%15 == 14 {
			b.WriteString(". ")
		} else {
			b.WriteByte(' ')
		}
	}
	return b.String()
}

// indexedWords counts the words of the message items st holds, by ref.
func indexedWords(st *fakeStore) (map[string]int, int) {
	byRef, total := map[string]int{}, 0
	for _, it := range st.items {
		if it.Kind != KindMessage {
			continue
		}
		ranking.ForEachWord([]byte(it.Text), func([]byte) { byRef[it.Ref]++; total++ })
	}
	return byRef, total
}

// A message of megabytes (the body limit's worth of distinct random words)
// is indexed for search up to the exchange's budget of index units, its
// first chunks in order, and a huge message leaves the other message of
// its exchange indexed: what one request costs to index is bounded
// whatever its text, where it grew with it (a 2 MiB message cost 11–13
// CPU-seconds of PostgreSQL's BM25 statistics). An ordinary long message
// (64 KB of words) is indexed whole.
func TestIndexerBoundsAnExchangesFullTextIndex(t *testing.T) {
	huge := randomWords(1, 2<<20)
	small := "I keep the spare key under the blue flowerpot."
	for _, tt := range indexerWindows {
		for _, c := range []struct {
			name        string
			turn, reply string
		}{
			{"huge turn", huge, small},
			{"huge reply", small, huge},
		} {
			t.Run(tt.name+"/"+c.name, func(t *testing.T) {
				st := newFakeStore()
				ix := NewIndexer(st, NewLocal(16), nil)
				ix.Window = tt.w
				ex := memory.Exchange{ID: "e1", Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c"}, At: time.Now(),
					Turn:  []memory.Message{{Role: "user", Content: c.turn}},
					Reply: memory.Message{Role: "assistant", Content: c.reply}}
				if err := ix.AfterSave(context.Background(), ex, memory.SaveResult{Inserted: 2}); err != nil {
					t.Fatal(err)
				}
				byRef, total := indexedWords(st)
				if total > exchangeIndexUnits {
					t.Errorf("indexed %d words, want at most the exchange's %d index units", total, exchangeIndexUnits)
				}
				if byRef["e1:0"] == 0 || byRef["e1:1"] == 0 {
					t.Fatalf("words indexed by message %v: want both messages indexed", byRef)
				}
				// The huge message's index is a prefix of it: its first
				// chunk is there, its last words are not.
				hugeRef, hugeChunks := "e1:0", -1
				if c.reply == huge {
					hugeRef = "e1:1"
				}
				for _, it := range st.items {
					if it.Ref == hugeRef {
						hugeChunks = max(hugeChunks, it.Chunk)
						if it.Chunk == 0 && !strings.HasPrefix(huge, it.Text) {
							t.Errorf("chunk 0 of the huge message is not its start")
						}
					}
				}
				if want := len(strings.Fields(huge)); byRef[hugeRef] >= want || hugeChunks < 0 {
					t.Errorf("indexed %d of the huge message's %d words in %d chunks", byRef[hugeRef], want, hugeChunks+1)
				}
				if byRef[hugeRef] < exchangeIndexUnits/4 {
					t.Errorf("indexed only %d words of the huge message: the budget is %d units", byRef[hugeRef], exchangeIndexUnits)
				}
			})
		}
		t.Run(tt.name+"/ordinary long message", func(t *testing.T) {
			long := randomWords(2, 64<<10)
			st := newFakeStore()
			ix := NewIndexer(st, NewLocal(16), nil)
			ix.Window = tt.w
			ex := memory.Exchange{ID: "e1", Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c"}, At: time.Now(),
				Turn:  []memory.Message{{Role: "user", Content: long}},
				Reply: memory.Message{Role: "assistant", Content: small}}
			if err := ix.AfterSave(context.Background(), ex, memory.SaveResult{Inserted: 2}); err != nil {
				t.Fatal(err)
			}
			if byRef, _ := indexedWords(st); byRef["e1:0"] != len(strings.Fields(long)) {
				t.Errorf("indexed %d of the message's %d words, want all", byRef["e1:0"], len(strings.Fields(long)))
			}
		})
	}
}

// withinIndexBudget keeps a prefix of each message's chunks, gives each
// message up to the floor before any extends past it, newest first, and
// spends no more than the budget.
func TestWithinIndexBudget(t *testing.T) {
	chunk := func(words int, prefix string) string {
		var b strings.Builder
		for i := range words {
			b.WriteString(prefix)
			b.WriteString(strings.Repeat("x", i%7+1))
			b.WriteByte('y' + byte(i%2))
			b.WriteByte(' ')
		}
		return b.String()
	}
	msgs := func() []cutMessage {
		var out []cutMessage
		for m, p := range []string{"old", "mid", "new"} {
			var cs []string
			for range 10 {
				cs = append(cs, chunk(50, p))
			}
			out = append(out, cutMessage{key: p, chunks: cs, embedded: 10 - m, embeddable: 10})
		}
		return out
	}
	// A message's first chunk costs one (its words are new), a later
	// chunk later (the same words again).
	seen := map[string]struct{}{}
	one, later := indexCost(chunk(50, "q"), seen), indexCost(chunk(50, "q"), seen)
	for _, tt := range []struct {
		name          string
		budget, floor int
		want          []int // chunks kept, oldest message first
	}{
		{"everything fits", 1 << 20, 1 << 20, []int{10, 10, 10}},
		{"floor first, newest first", 3*one + later, one, []int{1, 1, 2}},
		{"budget for the floors only", 3 * one, one, []int{1, 1, 1}},
		{"budget short of the floors", 2 * one, one, []int{0, 1, 1}},
		{"no floor: newest first", 2*one + 10*later, 0, []int{0, 2, 10}},
		{"nothing", 0, one, []int{0, 0, 0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ms := msgs()
			left := withinIndexBudget(ms, tt.budget, tt.floor)
			got, spent, seen := []int{}, 0, map[string]struct{}{}
			for i, m := range ms {
				got = append(got, len(m.chunks))
				for _, c := range m.chunks {
					spent += indexCost(c, seen)
				}
				if m.embedded > len(m.chunks) || m.embeddable > len(m.chunks) || m.embedded > 10-i {
					t.Errorf("message %d keeps %d chunks, embedded %d, embeddable %d", i, len(m.chunks), m.embedded, m.embeddable)
				}
			}
			if !slices.Equal(got, tt.want) || left != 30-got[0]-got[1]-got[2] {
				t.Errorf("kept %v chunks (left %d), want %v", got, left, tt.want)
			}
			if spent > tt.budget {
				t.Errorf("spent %d units, budget %d", spent, tt.budget)
			}
		})
	}
}
