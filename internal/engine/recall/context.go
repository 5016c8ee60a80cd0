package recall

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// ContextReader is a store's turns around a message. A Recaller given one
// (RecallOptions.Around) brings each recalled turn's neighbours with it.
type ContextReader interface {
	// MessagesAround returns the live messages within radius turns of each
	// referenced message (it included), each once, ordered by conversation
	// and Seq: the store's own (cached) messages, shared with every other
	// caller, which the caller reads and never writes into.
	// They are current as of rev, the user's Revisions the request read
	// (nil: the store reads them).
	MessagesAround(ctx context.Context, rev *memory.Revisions, tenant, user string, refs []memory.MessageRef, radius int) ([]*memory.Message, error)
}

// expand replaces the message hits among items (best first) by passages
// of the conversation around them: each hit with up to radius turns before
// it (the question it answers) and after it (the answer it got), none
// across a pause longer than maxTurnGap (see follows), hits
// whose turns touch or overlap merged into one passage. A passage takes
// the place, Ref, Score, CreatedAt and SaidAt of its best hit; its Turns
// are the turns it shows, in order, and its Text renders them, one
// "role: text" line each (memory.PassageText; a tool's turn shows
// nothing: see spoken). A hit turn shows its hit (the chunk that matched,
// for a long turn indexed in chunks) cut to the window around the
// sentences holding most of query's words (hitWindowBytes), other turns
// the same within maxNeighbourBytes (see queryMatcher.window). Other
// items, and hits whose turn is no longer stored, are kept as they are.
func expand(ctx context.Context, cr ContextReader, rev *memory.Revisions, tenant, user string, items []memory.Item, radius int, query string) ([]memory.Item, error) {
	return expandWith(ctx, cr, rev, tenant, user, items, radius, newQueryMatcher(query))
}

// expandWith is expand with the query's matcher made already (nil: a
// query without words), so a recall that also ranks the passages by it
// (rankPassages) makes it once.
func expandWith(ctx context.Context, cr ContextReader, rev *memory.Revisions, tenant, user string, items []memory.Item, radius int, mt *queryMatcher) ([]memory.Item, error) {
	if radius <= 0 {
		return items, nil
	}
	var refs []memory.MessageRef
	for _, it := range items {
		if it.Kind == KindMessage && it.Conversation != "" {
			if refs == nil {
				refs = make([]memory.MessageRef, 0, len(items))
			}
			refs = append(refs, memory.MessageRef{Conversation: it.Conversation, Key: it.Ref})
		}
	}
	if len(refs) == 0 {
		return items, nil
	}
	msgs, err := cr.MessagesAround(ctx, rev, tenant, user, refs, radius)
	if err != nil {
		return nil, fmt.Errorf("load context: %w", err)
	}
	turns := make([]turn, len(msgs))
	for i := 1; i < len(msgs); i++ {
		turns[i].follows = follows(msgs[i-1], msgs[i])
	}
	at := indexTurns(msgs)
	ranked := make([]rankedItem, len(items)) // passages replace hits
	kept := len(items)
	for r, it := range items {
		if it.Kind != KindMessage {
			continue
		}
		i, ok := at.find(msgs, it.Conversation, it.Ref)
		if !ok {
			continue
		}
		ranked[r].drop = true // unless it is its passage's best hit
		kept--
		turns[i].covered = true
		for j, n := i, 0; n < radius && j > 0 && turns[j].follows; j, n = j-1, n+1 {
			turns[j-1].covered = true
		}
		for j, n := i, 0; n < radius && j+1 < len(msgs) && turns[j+1].follows; j, n = j+1, n+1 {
			turns[j+1].covered = true
		}
		if turns[i].hitRank == 0 {
			turns[i].hitRank = r + 1
			turns[i].text, turns[i].clipped = mt.window(hitTurnText(msgs[i], it), hitWindowBytes, false)
		}
	}
	// Each maximal run of covered consecutive turns is one passage, in the
	// place of its best hit; the passages' Turns share one array.
	var shownAll []memory.PassageTurn
	for from := 0; from < len(msgs); {
		if !turns[from].covered {
			from++
			continue
		}
		to := from
		for to+1 < len(msgs) && turns[to+1].covered && turns[to+1].follows {
			to++
		}
		best := 0
		lastHit := -1 // the latest hit turn before j
		if shownAll == nil {
			shownAll = make([]memory.PassageTurn, 0, len(msgs))
		}
		start := len(shownAll)
		for j := from; j <= to; j++ {
			t := &turns[j]
			if t.hitRank != 0 {
				lastHit = j
				if best == 0 || t.hitRank < best {
					best = t.hitRank
				}
			}
			whole := strings.TrimSpace(indexableText(*msgs[j]))
			if t.hitRank == 0 && spoken(msgs[j].Role) {
				t.text, t.clipped = mt.window(whole, maxNeighbourBytes, beforeHit(turns[from:to+1], j-from, lastHit-from))
			}
			if t.text != "" || t.clipped {
				shownAll = append(shownAll, memory.PassageTurn{Key: msgs[j].Key, Role: msgs[j].Role, Text: t.text, Clipped: t.clipped,
					Hit: t.hitRank != 0, Whole: whole})
			}
		}
		if best > 0 {
			shown := shownAll[start:len(shownAll):len(shownAll)]
			ranked[best-1] = rankedItem{passage: memory.PassageText(shown), turns: shown, replaced: true}
			kept++
		}
		from = to + 1
	}
	out := make([]memory.Item, 0, kept)
	for r, it := range items {
		switch {
		case ranked[r].replaced:
			it.Text, it.Turns, it.Embedding = ranked[r].passage, ranked[r].turns, nil
		case ranked[r].drop:
			continue
		}
		out = append(out, it)
	}
	return out, nil
}

// beforeHit reports whether run[j], a turn around the hits of a passage's
// run of turns, is nearer the hit after it than the one before it
// (lastHit, the index of the latest hit before j; negative: none): what
// it shows is then its end, which the hit follows on from (see window).
// A turn as near one as the other shows its start, as the reply to the
// hit before it.
func beforeHit(run []turn, j, lastHit int) bool {
	for k := j + 1; k < len(run); k++ {
		if run[k].hitRank != 0 {
			return lastHit < 0 || k-j < j-lastHit
		}
	}
	return false
}

// maxTurnGap is the longest pause between two consecutive turns of a
// conversation for one to be shown around the other: past it the talk has
// moved on (a chat picked up the next day, a session opened weeks later),
// and the turn before the pause would fill the passage with a goodbye,
// and be shown under the hit's date, which is not its own.
const maxTurnGap = 6 * time.Hour

// follows reports whether b is the turn right after a in their
// conversation, said within maxTurnGap of it (see maxTurnGap). Turns of
// unknown time (zero) follow by their order alone.
func follows(a, b *memory.Message) bool {
	if a.Conversation != b.Conversation || b.Seq != a.Seq+1 {
		return false
	}
	if a.CreatedAt.IsZero() || b.CreatedAt.IsZero() {
		return true
	}
	return b.CreatedAt.Sub(a.CreatedAt) <= maxTurnGap
}

// spoken reports whether a turn of role is the user's or the assistant's
// words. Only those are shown around a recalled hit: a tool's result (a
// fetched page, an API's answer) is a third party's text, which recall
// never brings back into a prompt, where the memory block would carry it
// into another conversation with more authority than it had (the
// assistant's reply after it says what the conversation took from it).
func spoken(role string) bool { return role == "user" || role == "assistant" }

// rankedItem is what expand makes of one item: dropped (a hit in a
// passage of a better one), replaced by the passage around it, or kept.
type rankedItem struct {
	passage        string
	turns          []memory.PassageTurn
	drop, replaced bool
}

// turn is what expand knows of one of the turns around the hits.
type turn struct {
	// follows: the turn is right after the one before it.
	follows bool
	// covered: the turn is within radius of a hit.
	covered bool
	// hitRank is the rank+1 of the best hit on the turn (0: none).
	hitRank int
	// text is what the passage shows of the turn, followed by ellipsis
	// when clipped.
	text    string
	clipped bool
}

// turnIndex finds a message among the turns around the hits by its ref:
// by key alone while no two turns share one (keys are unique within a
// conversation, and recall rarely spans several), by conversation and key
// otherwise.
type turnIndex struct {
	byKey map[string]int
	byRef map[memory.MessageRef]int
}

// indexTurns indexes msgs by their refs.
func indexTurns(msgs []*memory.Message) turnIndex {
	byKey := make(map[string]int, len(msgs))
	for i, m := range msgs {
		if j, ok := byKey[m.Key]; ok && msgs[j].Conversation != m.Conversation {
			byRef := make(map[memory.MessageRef]int, len(msgs))
			for i, m := range msgs {
				byRef[memory.MessageRef{Conversation: m.Conversation, Key: m.Key}] = i
			}
			return turnIndex{byRef: byRef}
		}
		byKey[m.Key] = i
	}
	return turnIndex{byKey: byKey}
}

// find returns the index among msgs (those indexed) of the message of
// conversation conv and key key, and whether there is one.
func (x turnIndex) find(msgs []*memory.Message, conv, key string) (int, bool) {
	if x.byRef != nil {
		i, ok := x.byRef[memory.MessageRef{Conversation: conv, Key: key}]
		return i, ok
	}
	i, ok := x.byKey[key]
	return i, ok && msgs[i].Conversation == conv
}

// refOf names a stored message.
func refOf(m memory.Message) memory.MessageRef {
	return memory.MessageRef{Conversation: m.Conversation, Key: m.Key}
}

// hitTurnText is what a passage shows of a hit's turn: the whole turn when
// it was indexed as one chunk; else the hit chunk with the text around it,
// up to hitWindowBytes, when the chunk is shorter (a run of sentences the
// encoder reads whole, see Window); else the whole turn when it is short
// enough to have been one chunk of Chunk's, else the hit chunk.
func hitTurnText(m *memory.Message, hit memory.Item) string {
	whole := strings.TrimSpace(indexableText(*m))
	if len(hit.Text) < len(whole) && len(hit.Text) < hitWindowBytes {
		if i := strings.Index(whole, hit.Text); i >= 0 {
			return around(whole, i, i+len(hit.Text), hitWindowBytes-len("…")-len(ellipsis))
		}
	}
	if approxTokens(whole) <= chunkMax || len(Chunk(whole)) <= 1 { // Chunk keeps a short text whole
		return whole
	}
	return hit.Text
}

// around returns s[from:to] widened on both sides, at spaces, to at most n
// bytes in all (s[from:to] itself whole), with an ellipsis where s goes
// on.
func around(s string, from, to, n int) string {
	pad := max(0, n-(to-from))
	hi := min(len(s), to+pad-min(from, pad/2))
	lo := max(0, from-(pad-(hi-to))) // room the end leaves goes before
	if lo > 0 {
		if i := strings.IndexByte(s[lo:from], ' '); i >= 0 {
			lo += i + 1
		} else {
			lo = from
		}
	}
	if hi < len(s) {
		if i := strings.LastIndexByte(s[to:hi], ' '); i >= 0 {
			hi = to + i
		} else {
			hi = to
		}
	}
	out := strings.TrimSpace(s[lo:hi])
	if lo > 0 {
		out = "…" + out
	}
	if hi < len(s) {
		out += ellipsis
	}
	return out
}

// ellipsis ends a clipped text.
const ellipsis = memory.PassageEllipsis

// clip cuts s to at most n bytes, at the last space before: it returns the
// text to keep and whether it was cut, to be followed by ellipsis then.
func clip(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	cut := strings.LastIndexByte(s[:n], ' ')
	if cut <= 0 {
		cut = len(memory.Truncate(s, n))
	}
	return strings.TrimSpace(s[:cut]), true
}
