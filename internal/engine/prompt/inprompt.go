package prompt

import (
	"math"
	"strings"

	"github.com/memgate/memgate/internal/memory"
)

// maxRefilters bounds the passes assembleWindow makes to choose the
// passages again for the turns the recent turns' window dropped (one
// settles it unless the window keeps moving with the block's size).
const maxRefilters = 2

// promptTurns are the messages a prompt may show — the turns offered to
// the recent turns' window, then the current turn — indexed by stored key
// and by text at their newest place, so that what a prompt showing them
// from some place on shows is known without indexing them again: the
// window keeps the newest turns, and drops from the oldest.
type promptTurns struct {
	conv string // the request's conversation
	// keys and texts are the newest place of each key and text in the
	// messages; the keys of the stored messages the client resends are
	// at math.MaxInt (always shown).
	keys, texts map[string]int
	haveSummary bool // the conversation's summary is loaded
}

// newPromptTurns indexes msgs, the messages a prompt of conversation conv
// may show, oldest first; resent are the keys of the stored messages the
// client resends (continuation), haveSummary whether the conversation's
// summary is loaded.
func newPromptTurns(conv string, msgs []memory.Message, resent []string, haveSummary bool) *promptTurns {
	pt := &promptTurns{conv: conv, keys: make(map[string]int, len(msgs)+len(resent)),
		texts: make(map[string]int, len(msgs)), haveSummary: haveSummary}
	for i, m := range msgs {
		if m.Key != "" {
			pt.keys[m.Key] = i
		}
		// A reply as a client resent it, and as it is indexed: without
		// the reasoning block it opened with.
		pt.texts[strings.TrimSpace(m.Content)] = i
		pt.texts[strings.TrimSpace(m.Answer())] = i
	}
	for _, k := range resent {
		pt.keys[k] = math.MaxInt
	}
	return pt
}

// recallFilter returns what a recalled item shows in a prompt that shows
// the messages from place from on, and whether it is shown at all: not
// when it is one of those messages (by stored key — theirs, or of the
// stored messages the client resends — or by text), nor, when the summary
// is loaded, a summary of this conversation. A passage shows none of the
// turns in the prompt: it is left out when all its hits are, else shown
// without those turns (inView), so the tokens they would repeat go to
// other passages. A message before from is not in the prompt (the window
// dropped it), and a passage may show it.
func (pt *promptTurns) recallFilter(from int) func(memory.Item) (memory.Item, bool) {
	shown := func(places map[string]int, s string) bool { return placed(places, s, from, math.MaxInt) }
	return func(it memory.Item) (memory.Item, bool) {
		switch {
		case it.Kind == "message" && shown(pt.keys, it.Ref):
			return it, false
		case it.Kind == "summary" && pt.haveSummary && it.Conversation == pt.conv:
			return it, false
		case shown(pt.texts, strings.TrimSpace(it.Text)):
			return it, false
		}
		here := it.Conversation == pt.conv
		return inView(it, func(t memory.PassageTurn) bool { return (here && shown(pt.keys, t.Key)) || shown(pt.texts, t.Whole) })
	}
}

// touch reports whether any of items names a message at a place in [lo,
// hi) — by its ref, its text or one of its turns, as recallFilter reads
// them —: whether recallFilter(lo) and recallFilter(hi) may differ on
// them.
func (pt *promptTurns) touch(items []memory.Item, lo, hi int) bool {
	in := func(places map[string]int, s string) bool { return placed(places, s, lo, hi-1) }
	for _, it := range items {
		if (it.Kind == "message" && in(pt.keys, it.Ref)) || in(pt.texts, strings.TrimSpace(it.Text)) {
			return true
		}
		here := it.Conversation == pt.conv
		for _, t := range it.Turns {
			if (here && in(pt.keys, t.Key)) || in(pt.texts, t.Whole) {
				return true
			}
		}
	}
	return false
}

// placed reports whether s's newest place in places is in [lo, hi] (a
// resent key's, math.MaxInt, is in every range reaching it).
func placed(places map[string]int, s string, lo, hi int) bool {
	i, ok := places[s]
	return ok && i >= lo && i <= hi
}
