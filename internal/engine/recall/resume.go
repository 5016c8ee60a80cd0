package recall

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/memgate/memgate/internal/memory"
)

// The bytes of a message's text one window of a resumed cut holds: the
// first window of a round is small, so a message the round's budget has
// little left for costs little to cut, and each next one is twice the
// last, up to resumeWindowMax, so a round cuts about what it indexes (a
// window's last chunk, which may run on past it, is cut again by the
// next).
const (
	resumeWindowMin = 4 << 10
	resumeWindowMax = 32 << 10
)

// resumedCut cuts the indexable text of a message (trimmed) from the
// chunk the index backlog left it at, a window at a time, so that a round
// of the backlog cuts what it indexes and not the whole message again
// from its start (which, round after round over a huge message, is
// quadratic in its length).
//
// From chunk k at byte pos, it cuts as Window.chunks does: the runs left
// of the window's (embeddedRuns less k), then the rest as Chunk cuts it;
// only the sentence a run ends in the middle of may be cut otherwise
// (Window.chunks cuts the rest of it with the chunks after). The chunks
// it cuts from (k, pos) do not depend on its windows: each window starts
// where a chunk starts, where cutting anew gives what cutting on would
// have. Every word of text from pos on is in one chunk, in order.
type resumedCut struct {
	text string
	// from is where the cut started, in text.
	from int
	// pos is where the next chunk starts, k its index among all the
	// message's chunks.
	pos, k int
	// runTok is the size of the runs the message is cut into first
	// (Window.runTokens; 0: it is cut as Chunk cuts it), runs how many
	// are left to cut.
	runTok, runs int
	// window is how many bytes the next window holds.
	window int
	// ends are where each chunk cut ends in text, in order.
	ends []int
}

// resume returns a cut of text (a message's indexable text) from its
// k-th chunk, which starts at byte off. An offset of 0 past the first
// chunk (an entry recorded without one) is found by cutting text from its
// start once; an offset past text's end leaves nothing to cut.
func (w *Window) resume(text string, k, off int) *resumedCut {
	text = strings.TrimSpace(text)
	c := &resumedCut{text: text, pos: min(max(off, 0), len(text)), k: max(k, 0), runTok: w.runTokens(text), window: resumeWindowMin}
	defer func() { c.from = c.pos }()
	if c.k > 0 && off == 0 {
		all, _ := w.chunks(text)
		if c.k >= len(all) {
			c.pos = len(text)
		} else if ends := chunkEnds(text, all[:c.k]); len(ends) > 0 {
			c.pos = ends[len(ends)-1]
		}
	}
	if c.runTok > 0 {
		c.runs = max(0, embeddedRuns-c.k)
	}
	return c
}

// done reports whether every chunk of the message has been cut.
func (c *resumedCut) done() bool { return strings.TrimSpace(c.text[c.pos:]) == "" }

// after returns where, in text, the chunk after the first n cut starts.
func (c *resumedCut) after(n int) int {
	if n == 0 {
		return c.from
	}
	return c.ends[n-1]
}

// next cuts the chunks of the next window, and says how many of the
// first of them are embedded (runs, or chunks among the message's first
// embeddedChunks when it is cut as Chunk cuts it). It returns none once
// the message is cut whole.
func (c *resumedCut) next() ([]string, int) {
	for !c.done() {
		rest := c.text[c.pos:]
		window := memory.Truncate(rest, c.window)
		whole := len(window) == len(rest)
		var chunks []string
		embedded := 0
		switch {
		case c.runs > 0:
			out, left := chunkBy(splitSentences(window), c.runTok*3/4, c.runTok, c.runs)
			if !whole && len(left) == 0 {
				out = out[:max(0, len(out)-1)] // the last may run on past the window
			}
			chunks, embedded = spans(window, out), len(out)
			c.runs -= len(out)
		case c.pos == 0 && whole && c.runTok == 0:
			chunks = Chunk(window)
			embedded = min(len(chunks), embeddedChunks)
		default:
			chunks, _ = chunkBy(splitSentences(window), chunkTarget, chunkMax, -1)
			if !whole {
				chunks = chunks[:max(0, len(chunks)-1)]
			}
			if c.runTok > 0 {
				chunks = spans(window, chunks)
			} else {
				embedded = min(len(chunks), max(0, embeddedChunks-c.k))
			}
		}
		if len(chunks) == 0 && !whole {
			c.window *= 2 // one chunk longer than the window
			continue
		}
		c.window = min(2*c.window, max(resumeWindowMax, c.window))
		for _, e := range chunkEnds(window, chunks) {
			c.ends = append(c.ends, c.pos+e)
		}
		if len(chunks) > 0 {
			c.pos = c.ends[len(c.ends)-1]
		} else {
			c.pos = len(c.text) // only white space was left
		}
		c.k += len(chunks)
		return chunks, embedded
	}
	return nil, 0
}

// chunkEnds returns where in text each of chunks, cut from text in order,
// ends: the byte after its last rune. A chunk holds the runes of text
// but white space, in order (Chunk and Window.chunks only trim and join
// white space).
func chunkEnds(text string, chunks []string) []int {
	ends := make([]int, len(chunks))
	pos := 0
	for i, c := range chunks {
		for _, r := range c {
			if unicode.IsSpace(r) {
				continue
			}
			for pos < len(text) {
				tr, size := utf8.DecodeRuneInString(text[pos:])
				pos += size
				if !unicode.IsSpace(tr) {
					break
				}
			}
		}
		ends[i] = pos
	}
	return ends
}
