package record

import (
	"context"
	"errors"
	"slices"

	"github.com/memgate/memgate/internal/memory"
)

// StampReader reads the Stamps a conversation's live messages were stored
// with, and the Amends its messages carry (the store: a read of an index,
// no more).
type StampReader interface {
	// StampAt returns the live message of id with the greatest position at
	// or below pos among those with a Stamp; memory.ErrNotFound when there
	// is none.
	StampAt(ctx context.Context, id memory.Identity, pos int) (memory.Stamped, error)
	// StampAmends returns the Amends id's messages carry, live or not, by
	// position.
	StampAmends(ctx context.Context, id memory.Identity) ([]memory.Amend, error)
}

// maxCorrections bounds how many stored messages one check finds stored
// otherwise than the client sends them (sanitized, redacted, edited)
// before it gives up: each costs a binary search of reads.
const maxCorrections = 8

// maxEditTexts bounds how many edited messages' new texts one request's
// Edits carry for the save to store (memory.Edit.Text). The check finds at
// most maxCorrections+1 stored messages changed (an edit or a correction
// each) before it calls the change a fork (a Rewind), so every edit it
// finds carries its text; the bound only makes the cost explicit: a save
// writes two rows and indexes one message per text.
const maxEditTexts = maxCorrections + 1

// checkResent compares the part of a full-history client's resent history
// that ex's cut leaves out (memory.Exchange.Skipped, ex.Resent) with what
// the conversation stores there, through the Stamps the messages were
// stored with and the Amends they carry, and returns ex with what the
// save needs: the digest of that part (Gap), so the messages stored after
// it are stamped; when the client edited messages there, each on its own,
// the messages after them as they were, the Edits (the save supersedes
// the edited messages only, stores their new texts in their place, as
// stored: memory.Edit.Text, and amends the Stamps after them); and when
// it changed the history otherwise (a deletion, an insertion, a fork),
// the first stored message from which the stored history is no longer
// the client's (Rewind), which the save supersedes with everything after
// it, as an edit in the window is.
//
// A Stamp at rest sums the history as it was stored; the Amends at or
// before its position sum what the client changed since, so the
// client's digest through a position, with the Amends up to it, is the
// Stamp there when nothing else changed. The digests of the prefixes of
// the client's history before the window are taken (one SHA-256 pass over
// its text), and the one just before the window is compared with the
// stored one at that position: two reads, when nothing changed. Where
// they differ, a binary search over the stored positions finds the first
// stored message whose digest differs (a read per step). One whose text
// the client sends as memgate stored it once sanitized and redacted is no
// change: its leaf is corrected and the search goes on, up to
// maxCorrections; so are the messages without a stamp just before it (a
// gap, digested as stored: storedGap), which the client may send
// unredacted. One whose text the client changed is an edit: its leaf's
// change is an Amend, and the search goes on. What still differs there
// lies in the messages before it without a live stamp (never stored, or
// edited before), or in stamps summed otherwise from it on: an Amend of
// the message found. When the digest just
// before the window then matches, the changes were edits; when
// maxCorrections runs out, or the client's history is shorter, the
// client forked: the Rewind goes from the first message it changed. A
// change among the history's first memory.BranchHead messages is left to
// routing and Align, as before. Any failed read leaves ex as it is (no
// Gap: the messages stored after the gap get no Stamp; no Rewind): the
// chat's next request checks again.
func (c *Capturer) checkResent(ctx context.Context, ex memory.Exchange) memory.Exchange {
	w := memory.BranchHead + ex.Skipped // the window's first position
	if c.stamps == nil || ex.Skipped == 0 {
		return ex
	}
	digests := memory.Digests(ex.Resent.Msgs, w) // one pass over the history's text
	if len(digests) < w {
		return ex
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.OpTimeout)
	defer cancel()
	stored, err := c.stamps.StampAmends(ctx, ex.Identity)
	if err != nil {
		c.logger.WarnContext(ctx, "capture cannot check a cut history against its conversation", "exchange", ex.ID, "err", err)
		return ex
	}
	amends := slices.Clone(stored) // with the ones this check finds
	// amended returns the Amends of as at or before pos.
	amended := func(as []memory.Amend, pos int) memory.Digest {
		var d memory.Digest
		for _, a := range as {
			if a.Pos <= pos {
				d = d.Xor(a.Delta)
			}
		}
		return d
	}
	var fix, fixMiddle memory.Digest // corrections, all of them and those past the head
	client := func(pos int) memory.Digest { return digests[pos].Xor(fix).Xor(amended(amends, pos)) }
	var (
		edits  []memory.Edit
		rewind *memory.Rewind // the first stored message the client changed
	)
	texts := 0 // the Edits carrying their message's new text
	// edit adds delta to the Amend of the live message r; with supersede,
	// the client's text is text, as stored (nil: not stored).
	edit := func(r memory.Stamped, delta memory.Digest, supersede bool, text *memory.Message) {
		amends = append(amends, memory.Amend{Seq: r.Seq, Pos: r.Pos, Delta: delta})
		k := slices.IndexFunc(edits, func(e memory.Edit) bool { return e.Seq == r.Seq })
		if k < 0 {
			e := memory.Edit{Seq: r.Seq, Pos: r.Pos, Digest: r.Digest}
			for _, a := range stored {
				if a.Seq == r.Seq {
					e.Was = e.Was.Xor(a.Delta)
				}
			}
			e.Amend = e.Was
			edits, k = append(edits, e), len(edits)
		}
		edits[k].Amend = edits[k].Amend.Xor(delta)
		edits[k].Supersede = edits[k].Supersede || supersede
		if supersede && text != nil && edits[k].Text == nil && texts < maxEditTexts {
			edits[k].Text, texts = text, texts+1
		}
	}
	last, err := c.stamps.StampAt(ctx, ex.Identity, w-1)
	// found returns ex with the gap's digest: from the client's digests
	// where they met the stored ones (matched: through last, which may lie
	// before the window when the history grew by more than was stored;
	// corrected, they are the stored text's), else (nothing stored to
	// compare, a Rewind, or the gap's messages after last, never
	// compared) over the gap's messages as memgate stores them, so a
	// digest at rest never sums text it redacted (storedGap); with the
	// Amends that stay (all of them, or those before a Rewind's position,
	// whose save clears the others), as the Stamps before it sum them.
	found := func(rw *memory.Rewind, matched bool) memory.Exchange {
		from := memory.BranchHead
		if matched {
			from = max(from, last.Pos+1)
		}
		gap := storedGap(ex.Resent, from, w, c.redactor)
		if matched && last.Pos >= memory.BranchHead {
			gap = gap.Xor(digests[last.Pos]).Xor(digests[memory.BranchHead-1]).Xor(fixMiddle)
		}
		if rw != nil {
			gap = gap.Xor(amended(stored, rw.Pos-1))
		} else {
			gap = gap.Xor(amended(amends, w-1))
			ex.Edits = edits
		}
		ex.Gap, ex.Rewind = &gap, rw
		return ex
	}
	// forked returns ex with a Rewind from the first message the client
	// changed, if any: it changed more than edits explain.
	forked := func() memory.Exchange {
		if rewind == nil {
			return ex
		}
		c.metrics.rewinds.Inc()
		return found(rewind, false)
	}
	switch {
	case errors.Is(err, memory.ErrNotFound):
		return found(nil, false) // nothing stored there to compare
	case err != nil:
		c.logger.WarnContext(ctx, "capture cannot check a cut history against its conversation", "exchange", ex.ID, "err", err)
		return ex
	case last.Digest == client(last.Pos):
		return found(nil, true)
	}
	low, bad := -1, last // every stamped message at or below low matches; bad differs
	for range maxCorrections + 1 {
		for bad.Pos-low > 1 {
			mid := low + (bad.Pos-low)/2
			r, err := c.stamps.StampAt(ctx, ex.Identity, mid)
			switch {
			case errors.Is(err, memory.ErrNotFound):
				low = mid
			case err != nil:
				c.logger.WarnContext(ctx, "capture cannot check a cut history against its conversation", "exchange", ex.ID, "err", err)
				return ex
			case r.Pos <= low || r.Digest == client(r.Pos):
				low = mid
			default:
				bad = r
			}
		}
		p := bad.Pos
		sent, ok := ex.Resent.Message(p)
		var d memory.Digest // the client's leaf's correction at p
		switch {
		case !ok:
			return forked()
		case sent.Fingerprint() == bad.Fingerprint():
		case StoredForm(sent, c.redactor).Fingerprint() == bad.Fingerprint():
			// Stored sanitized or redacted: the stored leaf is the stored
			// text's.
			d = memory.Leaf(p, sent).Xor(memory.Leaf(p, bad.Message))
		case p < memory.BranchHead:
			return ex // the chat's first messages: routing's and Align's
		default:
			// Changed: an edit, if the messages after it are as stored.
			// The client's leaf is corrected to its stored form's, and
			// the Amend sums the change, both over stored forms only.
			if rewind == nil {
				rewind = &memory.Rewind{Seq: bad.Seq, Pos: p, Digest: bad.Digest}
			}
			s := StoredForm(sent, c.redactor)
			d = memory.Leaf(p, sent).Xor(memory.Leaf(p, s))
			edit(bad, memory.Leaf(p, s).Xor(memory.Leaf(p, bad.Message)), true, storedText(sent, c.redactor))
		}
		// The client's message at p is the stored one, or an edit of it.
		// What else differs lies in the messages before it that carry no
		// live stamp: never stored (a gap, digested as stored:
		// storedGap), stored without one, each summed at rest as stored,
		// which the client may send otherwise (a secret the store does
		// not keep), or edited before and superseded.
		prev := -1 // the stamped message before p, which matches
		switch r, err := c.stamps.StampAt(ctx, ex.Identity, p-1); {
		case err == nil:
			prev = r.Pos
		case !errors.Is(err, memory.ErrNotFound):
			c.logger.WarnContext(ctx, "capture cannot check a cut history against its conversation", "exchange", ex.ID, "err", err)
			return ex
		}
		head := unstampedFix(ex.Resent, digests, prev+1, min(p, memory.BranchHead), c.redactor)
		middle := unstampedFix(ex.Resent, digests, max(prev+1, memory.BranchHead), p, c.redactor)
		if p >= memory.BranchHead {
			middle = middle.Xor(d)
		} else {
			head = head.Xor(d)
		}
		fix, fixMiddle = fix.Xor(head).Xor(middle), fixMiddle.Xor(middle)
		if r := bad.Digest.Xor(client(p)); r != (memory.Digest{}) {
			if p < memory.BranchHead {
				return forked()
			}
			// The client changed a message the conversation holds no live
			// stamp of (never stored, or edited before), or the stamps
			// from p on were summed otherwise than those before it (a
			// branch stored whole, fresh, after an Amend): either way
			// they sum the history otherwise from p on, an Amend of p's
			// (of stored forms: the stamps' and the client's, corrected).
			edit(bad, r, false, nil)
		}
		if last.Digest == client(last.Pos) {
			return found(nil, true)
		}
		low, bad = p, last
	}
	return forked()
}

// storedGap returns the digest of the non-system messages of r at
// positions from to to (exclusive), each as the Capturer stores it
// (StoredForm): the digests the save stamps are at rest, where whoever
// reads the database could confirm a guess of a text they sum, so they
// never sum a secret the redactor keeps out of the store. It redacts
// every message of the gap: only a chat's first cut request and a rewind
// pay it, and a history that grew past its newest stamped message by
// more than its window pays it for the messages after that one;
// otherwise the client's digests, corrected, are the stored ones.
func storedGap(r memory.Resent, from, to int, red Redactor) memory.Digest {
	var d memory.Digest
	if from >= to {
		return d
	}
	pos := 0
	for _, m := range r.Msgs {
		if memory.IsSystem(m.Role) {
			continue
		}
		if pos >= to {
			break
		}
		if pos >= from {
			d = d.Xor(memory.Leaf(pos, StoredForm(m, red)))
		}
		pos++
	}
	return d
}

// unstampedFix returns what the digest of the non-system messages of r at
// positions from to to (exclusive) as the client sent them (digests, the
// prefixes' digests) lacks of theirs as the Capturer stores them
// (storedGap): zero when it stores each as sent.
func unstampedFix(r memory.Resent, digests []memory.Digest, from, to int, red Redactor) memory.Digest {
	if from >= to {
		return memory.Digest{}
	}
	d := storedGap(r, from, to, red).Xor(digests[to-1])
	if from > 0 {
		d = d.Xor(digests[from-1])
	}
	return d
}

// StoredForm returns m as the Capturer stores it: sanitized, and redacted
// by red (nil: none). A message red cannot read is as sanitized only.
func StoredForm(m memory.Message, red Redactor) memory.Message {
	m, _ = SanitizeMessage(m)
	if red != nil {
		if r, _, err := red.Message(m); err == nil {
			m = r
		}
	}
	return m
}

// storedText returns m as the Capturer stores it (StoredForm), to store
// as an edited message's new text (memory.Edit.Text), or nil when red
// cannot read it: text it could not redact is never stored.
func storedText(m memory.Message, red Redactor) *memory.Message {
	m, _ = SanitizeMessage(m)
	if red != nil {
		r, _, err := red.Message(m)
		if err != nil {
			return nil
		}
		m = r
	}
	m = m.Bare()
	return &m
}
