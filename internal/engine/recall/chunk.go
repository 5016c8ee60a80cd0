package recall

import (
	"strings"
	"unicode"
	"unicode/utf8"
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
	var out []string
	var cur strings.Builder
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, s)
		}
		cur.Reset()
	}
	for _, s := range splitSentences(text) {
		for _, piece := range splitLong(s, chunkMax*4) {
			if cur.Len() > 0 && approxTokens(cur.String())+approxTokens(piece) > chunkTarget {
				flush()
			}
			if cur.Len() > 0 {
				cur.WriteByte(' ')
			}
			cur.WriteString(piece)
		}
	}
	flush()
	return out
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
			cut = maxBytes
			for cut > 0 && !utf8.RuneStart(s[cut]) {
				cut--
			}
		}
		out = append(out, strings.TrimSpace(s[:cut]))
		s = strings.TrimSpace(s[cut:])
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}
