package recall

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/memgate/memgate/internal/memory"
)

// multiContext serves MessagesAround over several conversations whose
// turns may have gaps (superseded turns) and share keys: pointers to its
// own messages, shared as the stores' are.
type multiContext struct {
	msgs []memory.Message // ordered by conversation and Seq
}

func (f multiContext) MessagesAround(_ context.Context, _ *memory.Revisions, _, _ string, refs []memory.MessageRef, radius int) ([]*memory.Message, error) {
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
	var out []*memory.Message
	for i, k := range keep {
		if k {
			out = append(out, &f.msgs[i])
		}
	}
	return out, nil
}

// find returns the index of the turn of conversation conv and key key.
func (f multiContext) find(conv, key string) (int, bool) {
	i := slices.IndexFunc(f.msgs, func(m memory.Message) bool { return m.Conversation == conv && m.Key == key })
	return i, i >= 0
}

// randomContext returns 1–3 conversations of up to 30 turns each, with
// gaps in Seq, keys shared across conversations at times, every role, and
// texts empty, blank, short, with tool-call lines, of one long chunk or of
// many, in several scripts.
func randomContext(r *rand.Rand) multiContext {
	words := []string{"savings", "Lisbon", "déjà", "vu", "ação", "😀", "goal", "R$", "420"}
	text := func() string {
		var b strings.Builder
		switch r.IntN(10) {
		case 0:
			return ""
		case 1:
			return "   "
		case 2:
			b.WriteString("[tool_call search {}]\n")
		case 3:
			for b.Len() < 3000 { // indexed in chunks
				b.WriteString(words[r.IntN(len(words))])
				b.WriteString(". ")
			}
			return b.String()
		case 4:
			b.WriteString(strings.Repeat("x", r.IntN(2))) // one long chunk, no space to cut at, mid-rune at times
			b.WriteString(strings.Repeat("é", 300+r.IntN(60)))
			return b.String()
		}
		for range 1 + r.IntN(12) {
			b.WriteString(words[r.IntN(len(words))])
			b.WriteByte(' ')
		}
		return b.String()
	}
	var f multiContext
	for c := range 1 + r.IntN(3) {
		conv := fmt.Sprint("conv-", c)
		seq := int64(0)
		for range r.IntN(30) {
			seq += 1 + int64(r.IntN(5)/4) // gaps
			key := fmt.Sprintf("k%d", seq)
			if c > 0 && r.IntN(2) == 0 {
				key = fmt.Sprintf("c%d-k%d", c, seq)
			}
			f.msgs = append(f.msgs, memory.Message{Conversation: conv, Seq: seq, Key: key,
				Role: []string{"user", "assistant", "tool"}[r.IntN(3)], Content: text()})
		}
	}
	return f
}

// randomHits returns up to 25 items, best first: hits on stored turns
// (several on one turn at times), hits on turns no longer stored or
// without a conversation, summaries and facts.
func randomHits(r *rand.Rand, f multiContext) []memory.Item {
	var items []memory.Item
	for i := range r.IntN(25) {
		it := memory.Item{Kind: KindMessage, Conversation: fmt.Sprint("conv-", r.IntN(4)), Ref: fmt.Sprint("k", r.IntN(40)),
			Text: fmt.Sprint("chunk ", r.IntN(100)), Score: float64(25 - i), Embedding: []float32{1, 2}}
		switch r.IntN(10) {
		case 0:
			it.Kind, it.Ref = KindSummary, "v1"
		case 1:
			it.Kind = KindFact
		case 2:
			it.Conversation = ""
		case 3, 4, 5:
			if len(f.msgs) > 0 {
				m := f.msgs[r.IntN(len(f.msgs))]
				it.Conversation, it.Ref = m.Conversation, m.Key
			}
		case 6:
			if len(items) > 0 {
				it = items[r.IntN(len(items))]
				it.Text += " (another chunk)"
			}
		}
		items = append(items, it)
	}
	return items
}

// shownWhole is a short turn's text as a passage shows it: without its
// tool-call lines, trimmed.
func shownWhole(content string) string {
	var kept []string
	for _, l := range strings.Split(content, "\n") {
		if !strings.HasPrefix(l, "[tool_call ") {
			kept = append(kept, l)
		}
	}
	return strings.TrimSpace(strings.Join(kept, "\n"))
}

// line is one turn's line of an expected passage: role and text, or, for
// a text longer than its bound, that bound (text then unknown: cut around
// the query's words).
type line struct {
	role, text string
	bound      int
}

// expectedPassages computes, from expand's contract, which items expand
// keeps, in order, and the passage lines of those that become passages:
// a stored hit covers its turn and up to radius turns each side reached
// through consecutive Seqs of its conversation; each maximal run of covered
// consecutive turns is one passage, in the place of its best (first) hit,
// whose other hits are dropped; a hit turn shows its best hit's turn (or,
// indexed in chunks, that hit's chunk), a user's or assistant's turn
// around it its text, a tool's turn around it nothing.
func expectedPassages(f multiContext, items []memory.Item, radius int) (keep []int, passages map[int][]line) {
	type key struct {
		conv string
		seq  int64
	}
	stored := map[key]int{}
	for i, m := range f.msgs {
		stored[key{m.Conversation, m.Seq}] = i
	}
	covered := map[int]bool{}
	firstHit := map[int]int{} // turn -> index of its best hit
	for r, it := range items {
		if it.Kind != KindMessage || it.Conversation == "" {
			continue
		}
		i, ok := f.find(it.Conversation, it.Ref)
		if !ok {
			continue
		}
		if _, ok := firstHit[i]; !ok {
			firstHit[i] = r
		}
		m := f.msgs[i]
		for _, dir := range []int64{-1, 1} {
			for d := int64(0); d <= int64(radius); d++ {
				j, ok := stored[key{m.Conversation, m.Seq + dir*d}]
				if !ok {
					break
				}
				covered[j] = true
			}
		}
	}
	passages = map[int][]line{}
	for from := 0; from < len(f.msgs); from++ {
		if !covered[from] || from > 0 && covered[from-1] && f.msgs[from-1].Conversation == f.msgs[from].Conversation && f.msgs[from-1].Seq+1 == f.msgs[from].Seq {
			continue // not the first turn of a run
		}
		best := len(items)
		var lines []line
		for j := from; j < len(f.msgs) && covered[j] && (j == from || f.msgs[j-1].Conversation == f.msgs[j].Conversation && f.msgs[j-1].Seq+1 == f.msgs[j].Seq); j++ {
			m := f.msgs[j]
			whole := shownWhole(m.Content)
			l := line{role: m.Role}
			if r, ok := firstHit[j]; ok {
				best = min(best, r)
				l.text = whole
				if len(Chunk(whole)) > 1 {
					l.text = items[r].Text
				}
				if len(l.text) > hitWindowBytes {
					l.text, l.bound = "", hitWindowBytes
				}
			} else if m.Role == "user" || m.Role == "assistant" {
				l.text = whole
				if len(whole) > maxNeighbourBytes {
					l.text, l.bound = "", maxNeighbourBytes
				}
			}
			if l.text != "" || l.bound > 0 {
				lines = append(lines, l)
			}
		}
		passages[best] = lines
	}
	for r, it := range items {
		_, isHit := f.find(it.Conversation, it.Ref)
		isHit = isHit && it.Kind == KindMessage && it.Conversation != ""
		if _, best := passages[r]; !isHit || best {
			keep = append(keep, r)
		}
	}
	return keep, passages
}

// TestExpandProperties runs expand over random conversations and hits
// (radius -1 to 2, with and without a query) and wants what its contract
// says: items other than stored hits kept as they were, in their order;
// each passage once, in the place of its best hit, with that hit's fields
// and no embedding; the passage made of the hit turns and their
// neighbours within radius, in conversation order, each turn at most
// once; a long turn cut to its bound (an ellipsis where it was cut), on a
// rune boundary; a tool's turn shown only when it is itself a hit; and the
// shared turns left as they were.
func TestExpandProperties(t *testing.T) {
	queries := []string{"", "savings goal", "Lisbon déjà"}
	for seed := range uint64(800) {
		r := rand.New(rand.NewPCG(seed, 3))
		f := randomContext(r)
		items := randomHits(r, f)
		radius := r.IntN(4) - 1
		query := queries[r.IntN(len(queries))]
		stored := slices.Clone(f.msgs)
		got, err := expand(context.Background(), f, nil, "t", "u", slices.Clone(items), radius, query)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(f.msgs, stored) {
			t.Fatalf("seed %d: expand wrote into the shared turns", seed)
		}
		if radius <= 0 {
			if !reflect.DeepEqual(got, items) {
				t.Fatalf("seed %d: radius %d changed the items", seed, radius)
			}
			continue
		}
		keep, passages := expectedPassages(f, items, radius)
		if len(got) != len(keep) {
			t.Fatalf("seed %d: expand kept %d items, want %d (items %d)", seed, len(got), len(keep), len(items))
		}
		turnsShown := 0
		for k, r := range keep {
			want, g := items[r], got[k]
			lines, isPassage := passages[r]
			if !isPassage {
				if !reflect.DeepEqual(g, want) {
					t.Fatalf("seed %d: item %d = %+v, want it kept as %+v", seed, r, g, want)
				}
				continue
			}
			if text := memory.PassageText(g.Turns); text != g.Text {
				t.Fatalf("seed %d: passage of item %d is %q, its turns render %q", seed, r, g.Text, text)
			}
			want.Text, want.Turns, want.Embedding = g.Text, g.Turns, nil
			if !reflect.DeepEqual(g, want) {
				t.Fatalf("seed %d: passage of item %d = %+v, want its hit's fields %+v", seed, r, g, want)
			}
			gotLines := strings.Split(g.Text, "\n")
			if g.Text == "" {
				gotLines = nil
			}
			if len(gotLines) != len(lines) {
				t.Fatalf("seed %d: passage of item %d has %d lines, want %d:\n%s", seed, r, len(gotLines), len(lines), g.Text)
			}
			turnsShown += len(lines)
			for i, l := range lines {
				role, text, ok := strings.Cut(gotLines[i], ": ")
				switch {
				case !ok || role != l.role:
					t.Fatalf("seed %d: passage of item %d, line %d = %q, want role %q", seed, r, i, gotLines[i], l.role)
				case l.bound == 0 && text != l.text:
					t.Fatalf("seed %d: passage of item %d, line %d = %q, want %q", seed, r, i, text, l.role+": "+l.text)
				case l.bound > 0 && (!strings.HasSuffix(text, ellipsis) && !strings.HasPrefix(text, "… ") || len(text) > l.bound+len(ellipsis)+len("… ") || !utf8.ValidString(text)):
					t.Fatalf("seed %d: passage of item %d, line %d (%d bytes) not cut to %d bytes and an ellipsis: %q", seed, r, i, len(text), l.bound, text)
				}
			}
		}
		if turnsShown > len(f.msgs) {
			t.Fatalf("seed %d: passages show %d turns of %d", seed, turnsShown, len(f.msgs))
		}
	}
}
