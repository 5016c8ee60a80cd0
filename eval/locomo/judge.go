package locomo

import (
	"strings"
	"unicode"
)

// Words splits text into lower-case words of letters and digits (so
// punctuation and spacing, which a prompt may render differently, do not
// count).
func Words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// gramLen is the n-gram length coverage is judged by.
const gramLen = 5

// Prompt is the text a judged prompt holds, indexed for Covered.
type Prompt struct {
	grams  map[string]bool
	joined string // " w1 w2 ... wn "
}

// NewPrompt indexes text: its word 5-grams and its words in order.
func NewPrompt(text string) *Prompt {
	ws := Words(text)
	p := &Prompt{grams: make(map[string]bool, len(ws)), joined: " " + strings.Join(ws, " ") + " "}
	for i := 0; i+gramLen <= len(ws); i++ {
		p.grams[strings.Join(ws[i:i+gramLen], " ")] = true
	}
	return p
}

// Covered reports whether turn reached the prompt: at least half of its
// word 5-grams are in it, or, for a turn of fewer than 6 words, all of its
// words appear in it in order, together. A turn with no words is never
// covered.
func (p *Prompt) Covered(turn string) bool {
	ws := Words(turn)
	if len(ws) == 0 {
		return false
	}
	if len(ws) < gramLen+1 {
		return strings.Contains(p.joined, " "+strings.Join(ws, " ")+" ")
	}
	n, hit := 0, 0
	for i := 0; i+gramLen <= len(ws); i++ {
		n++
		if p.grams[strings.Join(ws[i:i+gramLen], " ")] {
			hit++
		}
	}
	return 2*hit >= n
}

// Depth buckets: how many sessions before the question's the evidence was
// said (0: the last session).
var DepthBuckets = []string{"0–1 sessions ago", "2–4", "5–9", "10–19", "20+"}

// DepthBucket names the bucket of an evidence turn said sessionsAgo
// sessions before the last one.
func DepthBucket(sessionsAgo int) string {
	switch {
	case sessionsAgo <= 1:
		return DepthBuckets[0]
	case sessionsAgo <= 4:
		return DepthBuckets[1]
	case sessionsAgo <= 9:
		return DepthBuckets[2]
	case sessionsAgo <= 19:
		return DepthBuckets[3]
	}
	return DepthBuckets[4]
}
