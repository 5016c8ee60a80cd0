package recall

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/memgate/memgate/internal/memory"
)

// ContextReader is what a store that keeps conversations may offer besides
// ItemSearcher: the turns around a message. A Recaller over such a store
// brings each recalled turn's neighbours with it.
type ContextReader interface {
	// MessagesAround returns the live messages within radius turns of each
	// referenced message (it included), each once, ordered by conversation
	// and Seq.
	MessagesAround(ctx context.Context, tenant, user string, refs []memory.MessageRef, radius int) ([]memory.Message, error)
}

// maxNeighbourBytes bounds the text a neighbouring turn adds to a passage
// (about 300 tokens): a long reply next to a hit is cut at a word.
const maxNeighbourBytes = 1200

// expand replaces the message hits among items (best first) by passages
// of the conversation around them: each hit with up to radius turns before
// it (the question it answers) and after it (the answer it got), hits
// whose turns touch or overlap merged into one passage. A passage takes
// the place, Ref, Score, CreatedAt and SaidAt of its best hit; its Text is
// its turns in order, one "role: text" line each, hit turns whole (a hit
// that is a chunk of a long turn stays that chunk) and other turns cut to
// maxNeighbourBytes. Other items, and hits whose turn is no longer stored,
// are kept as they are.
func expand(ctx context.Context, cr ContextReader, tenant, user string, items []memory.Item, radius int) ([]memory.Item, error) {
	var refs []memory.MessageRef
	for _, it := range items {
		if it.Kind == KindMessage && it.Conversation != "" {
			refs = append(refs, memory.MessageRef{Conversation: it.Conversation, Key: it.Ref})
		}
	}
	if len(refs) == 0 || radius <= 0 {
		return items, nil
	}
	msgs, err := cr.MessagesAround(ctx, tenant, user, refs, radius)
	if err != nil {
		return nil, fmt.Errorf("load context: %w", err)
	}
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
			hitText[i] = hitTurnText(msgs[i], it)
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
			if hitRank[j] == 0 {
				text = clip(strings.TrimSpace(indexableText(msgs[j].Content)), maxNeighbourBytes)
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

// refOf names a stored message.
func refOf(m memory.Message) memory.MessageRef {
	return memory.MessageRef{Conversation: m.Conversation, Key: m.Key}
}

// hitTurnText is what a passage shows of a hit's turn: the whole turn when
// it is short enough to have been indexed as one chunk, else the hit chunk.
func hitTurnText(m memory.Message, hit memory.Item) string {
	whole := strings.TrimSpace(indexableText(m.Content))
	if len(Chunk(whole)) <= 1 {
		return whole
	}
	return hit.Text
}

// clip cuts s to at most n bytes, at the last space before, with "…".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := strings.LastIndexByte(s[:n], ' ')
	if cut <= 0 {
		cut = n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
	}
	return strings.TrimSpace(s[:cut]) + " …"
}
