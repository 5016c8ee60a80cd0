package recall

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// oldExpand is expand as it was before it built each passage in one
// allocation (kept to test the new one against), with the helpers it used,
// and with the rule that a neighbouring tool turn shows nothing; what it
// shows of each turn is the query's window (queryMatcher.window), as
// expand's.
func oldExpand(ctx context.Context, cr multiContext, tenant, user string, items []memory.Item, radius int, query string) ([]memory.Item, error) {
	mt := newQueryMatcher(query)
	var refs []memory.MessageRef
	for _, it := range items {
		if it.Kind == KindMessage && it.Conversation != "" {
			refs = append(refs, memory.MessageRef{Conversation: it.Conversation, Key: it.Ref})
		}
	}
	if len(refs) == 0 || radius <= 0 {
		return items, nil
	}
	msgs := cr.copies(refs, radius)
	// follows[i]: msgs[i] is the turn right after msgs[i-1].
	follows := make([]bool, len(msgs))
	at := make(map[memory.MessageRef]int, len(msgs))
	for i, m := range msgs {
		follows[i] = i > 0 && m.Conversation == msgs[i-1].Conversation && m.Seq == msgs[i-1].Seq+1
		at[memory.MessageRef{Conversation: m.Conversation, Key: m.Key}] = i
	}
	covered := make([]bool, len(msgs))
	hitRank := make([]int, len(msgs)) // rank+1 of the best hit on each turn (0: none)
	hitText := make([]string, len(msgs))
	ranked := make([]memory.Item, len(items)) // by rank; passages replace hits
	keep := make([]bool, len(items))
	for r, it := range items {
		i, ok := at[memory.MessageRef{Conversation: it.Conversation, Key: it.Ref}]
		if it.Kind != KindMessage || !ok {
			ranked[r], keep[r] = it, true
			continue
		}
		covered[i] = true
		for j, n := i, 0; n < radius && j > 0 && follows[j]; j, n = j-1, n+1 {
			covered[j-1] = true
		}
		for j, n := i, 0; n < radius && j+1 < len(msgs) && follows[j+1]; j, n = j+1, n+1 {
			covered[j+1] = true
		}
		if hitRank[i] == 0 {
			hitRank[i] = r + 1
			hitText[i] = shown(mt, oldHitTurnText(msgs[i], it), hitWindowBytes)
		}
	}
	// Each maximal run of covered consecutive turns is one passage, in the
	// place of its best hit.
	for from := 0; from < len(msgs); {
		if !covered[from] {
			from++
			continue
		}
		to := from
		for to+1 < len(msgs) && covered[to+1] && follows[to+1] {
			to++
		}
		best := 0
		var b strings.Builder
		for j := from; j <= to; j++ {
			if hitRank[j] != 0 && (best == 0 || hitRank[j] < best) {
				best = hitRank[j]
			}
			text := hitText[j]
			if hitRank[j] == 0 && (msgs[j].Role == "user" || msgs[j].Role == "assistant") { // a tool's turn shows nothing
				text = shown(mt, strings.TrimSpace(indexableText(msgs[j].Content)), maxNeighbourBytes)
			}
			if text == "" {
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(msgs[j].Role)
			b.WriteString(": ")
			b.WriteString(text)
		}
		if best > 0 {
			it := items[best-1]
			it.Text, it.Embedding = b.String(), nil
			ranked[best-1], keep[best-1] = it, true
		}
		from = to + 1
	}
	out := make([]memory.Item, 0, len(items))
	for r, ok := range keep {
		if ok {
			out = append(out, ranked[r])
		}
	}
	return out, nil
}

// oldHitTurnText is hitTurnText as it was.
func oldHitTurnText(m memory.Message, hit memory.Item) string {
	whole := strings.TrimSpace(indexableText(m.Content))
	if len(Chunk(whole)) <= 1 {
		return whole
	}
	return hit.Text
}

// shown is what a passage shows of a turn's text s within n bytes: its
// window for mt, followed by " …" when cut.
func shown(mt *queryMatcher, s string, n int) string {
	w, cut := mt.window(s, n)
	if cut {
		w += " …"
	}
	return w
}

// multiContext serves MessagesAround over several conversations whose
// turns may have gaps (superseded turns) and share keys: pointers to its
// own messages, shared as the stores' are.
type multiContext struct {
	msgs []memory.Message // ordered by conversation and Seq
}

func (f multiContext) MessagesAround(_ context.Context, _, _ string, refs []memory.MessageRef, radius int) ([]*memory.Message, error) {
	var out []*memory.Message
	for i, k := range f.around(refs, radius) {
		if k {
			out = append(out, &f.msgs[i])
		}
	}
	return out, nil
}

// copies returns what MessagesAround does, copied: what oldExpand read.
func (f multiContext) copies(refs []memory.MessageRef, radius int) []memory.Message {
	var out []memory.Message
	for i, k := range f.around(refs, radius) {
		if k {
			out = append(out, f.msgs[i])
		}
	}
	return out
}

// around reports, for each of f's messages, whether it is within radius of
// a message refs names.
func (f multiContext) around(refs []memory.MessageRef, radius int) []bool {
	keep := make([]bool, len(f.msgs))
	for _, r := range refs {
		for _, m := range f.msgs {
			if r.Conversation != m.Conversation || r.Key != m.Key {
				continue
			}
			for i, n := range f.msgs {
				if n.Conversation == m.Conversation && n.Seq >= m.Seq-int64(radius) && n.Seq <= m.Seq+int64(radius) {
					keep[i] = true
				}
			}
		}
	}
	return keep
}

// TestExpandMatchesOldExpand runs expand and the algorithm it replaced
// over random conversations (several, with gaps, keys shared between
// them, turns empty, long, chunked, with tool calls or non-ASCII text) and
// random items (hits, several on one turn, hits no longer stored,
// summaries, facts, hits without a conversation), and wants the same
// items, texts and order, leaving the shared turns as they were.
func TestExpandMatchesOldExpand(t *testing.T) {
	words := []string{"savings", "Lisbon", "déjà", "vu", "ação", "😀", "goal", "R$", "420", "  ", "\n", "."}
	text := func(r *rand.Rand) string {
		var b strings.Builder
		switch r.IntN(9) {
		case 0:
			return ""
		case 1:
			return "   "
		case 2:
			b.WriteString("[tool_call search {}]\n")
		case 3:
			for b.Len() < 3000 { // chunked when indexed
				b.WriteString(words[r.IntN(len(words))])
				b.WriteString(". ")
			}
		case 4, 5:
			b.WriteString(strings.Repeat("x", r.IntN(2))) // no space to cut at, mid-rune at times
			b.WriteString(strings.Repeat("é", 700))
		}
		for range r.IntN(400) {
			b.WriteString(words[r.IntN(len(words))])
			if r.IntN(3) > 0 {
				b.WriteByte(' ')
			}
		}
		return b.String()
	}
	for seed := range uint64(500) {
		r := rand.New(rand.NewPCG(seed, 3))
		var f multiContext
		for c := range 1 + r.IntN(3) {
			conv := fmt.Sprint("conv-", c)
			seq := int64(0)
			for range r.IntN(30) {
				seq += 1 + int64(r.IntN(5)/4) // gaps
				key := fmt.Sprintf("k%d", seq)
				if c > 0 && r.IntN(2) == 0 {
					key = fmt.Sprintf("c%d-k%d", c, seq) // keys shared only at times
				}
				f.msgs = append(f.msgs, memory.Message{Conversation: conv, Seq: seq, Key: key,
					Role: []string{"user", "assistant", "tool"}[r.IntN(3)], Content: text(r)})
			}
		}
		var items []memory.Item
		for range r.IntN(25) {
			it := memory.Item{Kind: KindMessage, Conversation: fmt.Sprint("conv-", r.IntN(4)), Ref: fmt.Sprint("k", r.IntN(40)),
				Text: fmt.Sprint("chunk ", r.IntN(100)), Score: r.Float64(), Embedding: []float32{1, 2}}
			switch r.IntN(10) {
			case 0:
				it.Kind, it.Ref = KindSummary, "v1"
			case 1:
				it.Kind = "fact"
			case 2:
				it.Conversation = ""
			case 3, 4:
				if len(f.msgs) > 0 {
					m := f.msgs[r.IntN(len(f.msgs))]
					it.Conversation, it.Ref = m.Conversation, m.Key
				}
			case 5:
				if len(items) > 0 {
					it = items[r.IntN(len(items))]
					it.Text += " (another chunk)"
				}
			}
			items = append(items, it)
		}
		radius := r.IntN(4) - 1
		query := ""
		if r.IntN(2) == 0 {
			query = words[r.IntN(len(words))] + " " + words[r.IntN(len(words))]
		}
		want, err := oldExpand(context.Background(), f, "t", "u", slices.Clone(items), radius, query)
		if err != nil {
			t.Fatal(err)
		}
		stored := slices.Clone(f.msgs)
		got, err := expand(context.Background(), f, "t", "u", slices.Clone(items), radius, query)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d: expand(radius %d)\n = %+v\nwant %+v", seed, radius, got, want)
		}
		if !reflect.DeepEqual(f.msgs, stored) {
			t.Fatalf("seed %d: expand wrote into the shared turns", seed)
		}
	}
}
