package memory

import (
	"crypto/sha256"
	"encoding/binary"
)

// Digest sums a run of a client's history: the XOR of each message's
// Leaf, so the digest of a history's first k+1 messages extends that of its
// first k by one XOR, and a middle run's is two such digests' XOR. A
// stored message of a full-history client carries the digest of the
// history through it (Stamp), which lets a later request of that chat
// tell, with one read, whether the part of its history its cut leaves out
// (CutHistory) is still what was stored (see Resent).
type Digest [16]byte

// Leaf returns the digest of the message m at position pos (counted from
// 0 among a history's non-system messages): a SHA-256 of the position and
// m's Fingerprint, so a message moved, dropped or changed changes the
// digests through it.
func Leaf(pos int, m Message) Digest {
	var buf []byte
	return leaf(&buf, pos, m)
}

// leaf is Leaf writing the hashed bytes in *buf, which it grows and keeps
// for the next call.
func leaf(buf *[]byte, pos int, m Message) Digest {
	b := binary.BigEndian.AppendUint64((*buf)[:0], uint64(pos))
	b = append(append(append(b, m.Role...), 0), m.Content...)
	*buf = b
	sum := sha256.Sum256(b)
	return Digest(sum[:16])
}

// Digests returns the digest of each prefix of msgs' first n non-system
// messages (all of them when they are fewer): out[i] is that of the first
// i+1. One SHA-256 pass over their text.
func Digests(msgs []Message, n int) []Digest {
	out := make([]Digest, 0, min(len(msgs), n))
	var (
		d   Digest
		buf []byte
	)
	for _, m := range msgs {
		if len(out) == n {
			break
		}
		if IsSystem(m.Role) {
			continue
		}
		d = d.Xor(leaf(&buf, len(out), m))
		out = append(out, d)
	}
	return out
}

// Xor returns d XOR e: d with e's leaves added (or taken away).
func (d Digest) Xor(e Digest) Digest {
	for i := range d {
		d[i] ^= e[i]
	}
	return d
}

// Stamp is where a stored message stands in the history of the
// full-history client whose exchange stored it: its position among that
// history's non-system messages, and the Digest of the history through it
// (each message as stored, sanitized and redacted, those the exchange
// left out too: see Exchange.Gap). A message stored
// without a resent history (a newest-only client's) has none (Known
// false).
type Stamp struct {
	Known  bool
	Pos    int
	Digest Digest
}

// Stamped is a stored message with its Stamp.
type Stamped struct {
	Message
	Stamp
}

// Rewind is set on an exchange whose client changed (edited, dropped or
// inserted) a message in the part of its history the exchange left out
// (Exchange.Skipped): the stored live message Seq, at Pos with Digest, is
// the first whose history is no longer the client's. A save that finds it
// so still supersedes it and the live messages after it, as an edit
// inside the stored window does (Align), and stores the exchange's
// window after them; one that finds it otherwise (another save moved the
// conversation on meanwhile) ignores the Rewind.
type Rewind struct {
	Seq    int64  `json:"seq"`
	Pos    int    `json:"pos"`
	Digest Digest `json:"digest"`
}

// Amend is what the Stamps of a conversation's messages at or past Pos
// sum otherwise than the history its client now sends (each message as
// stored, sanitized and redacted): the XOR of the leaves at rest and the
// client's there, where the client edited a message its requests no
// longer store (Edit). The stored message Seq carries it (it may have
// left the live branch); the check of a cut history (Resent) adds the
// Amends at or before a position to the client's digest before it
// compares it with a Stamp there, so an edit deep in a long chat costs
// one row, not the re-stamping of every message after it. Like a Stamp
// it sums only stored forms.
type Amend struct {
	Seq   int64
	Pos   int
	Delta Digest
}

// Edit is set on an exchange whose client changed a message in the part
// of its history the exchange left out (Exchange.Skipped) and left the
// messages after it as they were: the stored message Seq, live at Pos
// with the Stamp Digest and the Amend Was (zero: none) when the Capturer
// read it, carries Amend from now on, and leaves the live branch when
// Supersede is set (its text changed: its old copy goes, as an edit in
// the window's does). Text, when set with Supersede, is the message's new
// text as memgate stores it (sanitized and redacted): the save stores it
// as the live message Seq at Pos, with the Stamp Digest and Amend, and
// keeps the old text in a new superseded row (see contract.AmendRow);
// unset (its redaction failed, or the request edited more messages than
// one check stores), the old copy goes and the new text is not stored.
// Without Supersede the change was in the unstored run before it. A save
// that finds the message otherwise ignores the Edit.
type Edit struct {
	Seq       int64    `json:"seq"`
	Pos       int      `json:"pos"`
	Digest    Digest   `json:"digest"`
	Was       Digest   `json:"was"`
	Amend     Digest   `json:"amend"`
	Supersede bool     `json:"supersede,omitempty"`
	Text      *Message `json:"text,omitempty"`
}

// Resent is a cut request's whole history as its client sent it, kept in
// memory with its exchange (never queued) so that the Capturer can check,
// before the save, that the part the cut left out is still what the
// conversation stores (see Rewind).
type Resent struct {
	// Msgs are the request's messages, system ones included.
	Msgs []Message
}

// Message returns the non-system message at position pos of r's history.
func (r Resent) Message(pos int) (Message, bool) {
	i := 0
	for _, m := range r.Msgs {
		if IsSystem(m.Role) {
			continue
		}
		if i == pos {
			return m, true
		}
		i++
	}
	return Message{}, false
}

// Stamps returns the Stamp of each of msgs (ex's messages that a save
// stores: the last len(msgs) of ex.Prior, ex.Turn and ex.Reply, in that
// order). They are Known when ex resends its history (Prior), and, when it
// left a part of it out (Skipped), has that part's digest (Gap) for the
// messages after it; none are Known past a cut turn's gap (TurnSkipped).
func Stamps(ex Exchange, stored int) []Stamp {
	out := make([]Stamp, stored)
	if len(ex.Prior) == 0 || stored == 0 {
		return out
	}
	n := len(ex.Prior) + len(ex.Turn) + 1
	at := func(i int) Message { // the exchange's i-th message
		switch {
		case i < len(ex.Prior):
			return ex.Prior[i]
		case i < n-1:
			return ex.Turn[i-len(ex.Prior)]
		}
		return ex.Reply
	}
	first := n - stored
	var (
		d   Digest
		buf []byte
	)
	for i := range n {
		if ex.TurnSkipped > 0 && i == len(ex.Prior)+BranchHead {
			return out // past the turn's gap: its length is not the turn's
		}
		pos := i
		if ex.Skipped > 0 && i >= BranchHead {
			if i == BranchHead {
				if ex.Gap == nil {
					return out // the digests past the gap are unknown
				}
				d = d.Xor(*ex.Gap)
			}
			pos += ex.Skipped
		}
		d = d.Xor(leaf(&buf, pos, at(i)))
		if i >= first {
			out[i-first] = Stamp{Known: true, Pos: pos, Digest: d}
		}
	}
	return out
}
