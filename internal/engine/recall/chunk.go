package recall

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/memgate/memgate/internal/memory"
)

// Chunking bounds, in approximate tokens (see approxTokens): a text up to
// chunkMax is one chunk; a longer one is cut at sentence boundaries into
// chunks of about chunkTarget, none above chunkMax unless one sentence is.
const (
	chunkTarget = 300
	chunkMax    = 400
)

// approxTokens estimates a text's token count as one token per four bytes,
// close enough for English and Portuguese prose to size chunks without a
// tokenizer.
func approxTokens(s string) int { return (len(s) + 3) / 4 }

// Chunk splits text into passages for indexing: the whole trimmed text when
// it is at most ~400 tokens, else consecutive runs of whole sentences of
// ~300 tokens each. A single sentence longer than ~400 tokens is cut at word
// boundaries. Empty text gives no chunks.
func Chunk(text string) []string {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil
	}
	if approxTokens(text) <= chunkMax {
		return []string{text}
	}
	out, _ := chunkBy(splitSentences(text), chunkTarget, chunkMax, -1)
	return out
}

// chunkBy packs sentences, in order, into chunks of about target
// approximate tokens, none above max unless one sentence is (it is then
// cut at word boundaries). It stops after limit chunks (limit < 0: no
// limit) and returns the sentences left.
func chunkBy(sentences []string, target, max, limit int) (out, rest []string) {
	var cur strings.Builder
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, s)
		}
		cur.Reset()
	}
	for i, s := range sentences {
		pieces := splitLong(s, max*4)
		for j, piece := range pieces {
			if cur.Len() > 0 && approxTokens(cur.String())+approxTokens(piece) > target {
				flush()
				if limit >= 0 && len(out) >= limit {
					return out, append([]string{strings.Join(pieces[j:], " ")}, sentences[i+1:]...)
				}
			}
			if cur.Len() > 0 {
				cur.WriteByte(' ')
			}
			cur.WriteString(piece)
		}
	}
	flush()
	return out, nil
}

// Window is how much of a text an embedder reads: Pieces counts a text's
// pieces (its tokenizer's), of which it reads the first Max. The built-in
// encoder reads 128; an embedder that reads whole texts has no Window.
type Window struct {
	Pieces func(text string) int
	Max    int
}

// windowShare is the share of the embedder's window a run of a long
// message fills at most: about two or three sentences (45 of the
// encoder's 128 pieces). A statement said in passing then makes up a good
// part of its run's vector, where a run filling the window, or the whole
// message, dilutes it among the other sentences: on user messages of
// about 600 bytes holding one statement among everyday sentences, 0.9
// found no more statements than no runs at all, 0.35–0.5 a quarter more,
// single sentences (0.2) half more, at twice the items of 0.35
// (BENCHMARKS.md, session 16). On assistant replies of 1–2 KB holding one
// recommendation among advice on the same topic, runs of 0.35–0.5 found
// a third more of them than the replies' first 128 pieces per chunk, and
// runs of 0.9 a sixth more (session 17).
const windowShare = 0.35

// windowSample is how much of a text Window.chunks counts pieces of to
// learn its bytes per piece (about 500 pieces of English).
const windowSample = 2048

// chunks splits a message's text for indexing so that the embedder
// reads every word of it, and says how many of the first chunks are
// embedded (the rest are stored for full text only: see embeddedChunks).
// When w is nil or the text fits the embedder's window whole, it cuts as
// Chunk does, the first embeddedChunks embedded. Else it cuts runs of
// whole sentences of at most windowShare of the window (sized from the
// text's own bytes per piece, so Portuguese, which takes about twice the
// pieces of English per byte, gets shorter runs), as many as read the
// pieces of embeddedChunks whole windows (about 45 runs, 8 KB of
// English), all embedded, then the rest as Chunk cuts it. Every word of
// text is in one chunk, in order.
func (w *Window) chunks(text string) ([]string, int) {
	text = strings.TrimSpace(text)
	whole := func() ([]string, int) {
		cs := Chunk(text)
		return cs, min(len(cs), embeddedChunks)
	}
	maxTok := w.runTokens(text)
	if maxTok == 0 {
		return whole()
	}
	out, rest := chunkBy(splitSentences(text), maxTok*3/4, maxTok, embeddedRuns)
	embedded := len(out)
	if len(rest) > 0 {
		more, _ := chunkBy(rest, chunkTarget, chunkMax, -1)
		out = append(out, more...)
	}
	return spans(text, out), embedded
}

// runTokens returns the size, in approximate tokens, of the runs
// Window.chunks cuts text (trimmed) into first, or 0 when it cuts text as
// Chunk does: w is nil, or text fits the embedder's window whole.
func (w *Window) runTokens(text string) int {
	if w == nil || w.Max <= 0 || text == "" {
		return 0
	}
	sample := memory.Truncate(text, windowSample)
	n := w.Pieces(sample)
	if len(sample) == len(text) && n <= w.Max || n == 0 {
		return 0
	}
	return max(8, int(float64(len(sample))/float64(n)*float64(w.Max)*windowShare)/4)
}

// embeddedRuns is how many runs of a long message are embedded: as many
// pieces as embeddedChunks whole windows, so a message of a few KB has a
// vector for every word (a 6 KB reply, 16 runs alone, would leave its
// second half to full text), and embedding stays bounded as before (runs
// a third of the window cost about half as much per piece).
const embeddedRuns = 45 // embeddedChunks / windowShare, rounded down

// spans returns, for chunks cut from text in order (whitespace trimmed,
// line breaks and runs of spaces joined as one space: the other runes
// kept), each chunk's span of text itself, so that a passage finds its
// hit chunk in the message, line breaks and all. A chunk it cannot match
// is returned as it is.
func spans(text string, chunks []string) []string {
	pos := 0
	for i, c := range chunks {
		n := 0
		for _, r := range c {
			if !unicode.IsSpace(r) {
				n++
			}
		}
		start := len(text) - len(strings.TrimLeftFunc(text[pos:], unicode.IsSpace))
		end := start
		for n > 0 && end < len(text) {
			r, size := utf8.DecodeRuneInString(text[end:])
			if !unicode.IsSpace(r) {
				n--
			}
			end += size
		}
		if n > 0 {
			return chunks // not cut from text as described: keep them
		}
		chunks[i], pos = text[start:end], end
	}
	return chunks
}

// splitSentences cuts text after '.', '!', '?' followed by a space, and at
// line breaks, so "5.000" and "3.5" stay whole.
func splitSentences(text string) []string {
	var out []string
	start := 0
	for i, r := range text {
		end := -1
		switch r {
		case '\n':
			end = i
		case '.', '!', '?':
			next, _ := utf8.DecodeRuneInString(text[i+1:])
			if i+1 >= len(text) || unicode.IsSpace(next) {
				end = i + 1
			}
		}
		if end < 0 {
			continue
		}
		if s := strings.TrimSpace(text[start:end]); s != "" {
			out = append(out, s)
		}
		start = end
	}
	if s := strings.TrimSpace(text[start:]); s != "" {
		out = append(out, s)
	}
	return out
}

// splitLong cuts s at spaces into pieces of at most maxBytes (a word longer
// than that is cut at a rune boundary).
func splitLong(s string, maxBytes int) []string {
	if len(s) <= maxBytes {
		return []string{s}
	}
	var out []string
	for len(s) > maxBytes {
		cut := strings.LastIndexByte(s[:maxBytes], ' ')
		if cut <= 0 {
			cut = len(memory.Truncate(s, maxBytes))
		}
		out = append(out, strings.TrimSpace(s[:cut]))
		s = strings.TrimSpace(s[cut:])
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}
