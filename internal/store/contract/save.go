package contract

import (
	"cmp"
	"slices"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// AlignSlack is how many live messages beyond the length of a resent
// history a save compares it with (memory.Align).
const AlignSlack = 64

// TailLen is how many of its conversation's newest live messages a save of
// ex reads to align the history ex resends: none when it resends none. A
// history cut by memory.CutHistory reads as many as its window, and at
// least memory.BranchHead, so that a conversation holding fewer than its
// head is read whole (see PlanSave): never more than the cut keeps, however
// long the client's history.
func TailLen(ex memory.Exchange) int {
	if len(ex.Prior) == 0 {
		return 0
	}
	if ex.Skipped > 0 {
		return max(len(ex.Window()), memory.BranchHead) + AlignSlack
	}
	return len(ex.Prior) + AlignSlack
}

// HeadLen is how many of its conversation's first live messages a save of
// ex compares the history it resends with (memory.Parts): the messages of
// ex.Head (Prior and Turn, or the first memory.BranchHead of a cut
// history) when it carries a BranchSeed, else none.
func HeadLen(ex memory.Exchange) int {
	if ex.BranchSeed == "" {
		return 0
	}
	if ex.Skipped > 0 {
		return memory.BranchHead
	}
	return len(ex.Prior) + len(ex.Turn)
}

// SaveConv is a conversation as a save transaction found it, which
// PlanSave advances as it plans the transaction's exchanges into it.
type SaveConv struct {
	// LastSeq is the highest seq stored in the conversation.
	LastSeq int64
	// Tail is its newest live messages, oldest first: at least TailLen of
	// every exchange planned into it (nil when none resends history).
	Tail []memory.Message
	// Head is its first live messages, oldest first: at least HeadLen of
	// every exchange planned into it, or all of them (HeadAll). A store
	// sets both with SetTail when the tail it read holds every live
	// message, else with SetHead when an exchange needs them (NeedsHead).
	Head    []memory.Message
	HeadAll bool
	// Latest is the latest time of the exchanges planned into it; zero
	// while none was.
	Latest time.Time
	// Deleted is when the conversation was last deleted (zero: never):
	// exchanges received at or before it are dropped (Received).
	Deleted time.Time
	// Rewound are the live messages the exchanges planned into it name
	// in their Rewind, by seq, as the store read them (SetRewound): a
	// Rewind whose message is not among them, or is there with another
	// Stamp, is ignored.
	Rewound map[int64]Rewound
	// Edited are the messages the exchanges planned into it name in
	// their Edits, by seq, as the store read them (SetEdited): an Edit
	// whose message is not live there, or is with another Stamp or Amend,
	// is ignored.
	Edited map[int64]Edited
	saved  map[string]bool // ids of the exchanges planned into it
	// appended and superseded count the messages PlanSave appended to
	// it and took out of its live branch.
	appended, superseded int
}

// Rewound is a live message an exchange's Rewind names, as a save read it.
type Rewound struct {
	memory.Stamp
	// Live is how many live messages the conversation held from it on
	// (itself included) when it was read.
	Live int
	// appended and superseded are SaveConv's counts when it was read.
	appended, superseded int
}

// Edited is a message an exchange's Edit names, as a save read it: its
// Stamp (Known false when it is not live or has none), its Amend and when
// it was said (its CreatedAt; zero: unknown).
type Edited struct {
	memory.Stamp
	Amend memory.Digest
	Said  time.Time
}

// EditsToRead returns the seqs of the messages ex's Edits name that a
// save of ex into c must read (SetEdited) before PlanSave.
func (c *SaveConv) EditsToRead(ex memory.Exchange) []int64 {
	var out []int64
	for _, e := range ex.Edits {
		if _, ok := c.Edited[e.Seq]; !ok {
			out = append(out, e.Seq)
		}
	}
	return out
}

// SetEdited records the message seq as read: its Stamp when live (st.Known
// false when it is not live or has none), its Amend (zero: none) and when
// it was said (its CreatedAt), which its new text keeps.
func (c *SaveConv) SetEdited(seq int64, st memory.Stamp, amend memory.Digest, said time.Time) {
	if c.Edited == nil {
		c.Edited = map[int64]Edited{}
	}
	c.Edited[seq] = Edited{Stamp: st, Amend: amend, Said: said}
}

// edits returns the Amends of ex's Edits that hold (each message as the
// Capturer read it, c.Edited), with the new texts to store (Revised, the
// message each replaces at its Seq, said when it was: Edited.Said, else
// at; their keys follow every message ex may append), and advances
// c: a message superseded without a new text leaves its Tail and Head,
// one with its new text is replaced there.
func (c *SaveConv) edits(ex memory.Exchange, at time.Time) ([]AmendRow, []memory.Message, []memory.Stamp) {
	var (
		out     []AmendRow
		revised []memory.Message
		stamps  []memory.Stamp
	)
	for _, e := range ex.Edits {
		r, ok := c.Edited[e.Seq]
		if !ok || !r.Known || r.Pos != e.Pos || r.Digest != e.Digest || r.Amend != e.Was {
			continue
		}
		out = append(out, AmendRow{Seq: e.Seq, Amend: e.Amend, Supersede: e.Supersede})
		r.Amend = e.Amend
		if e.Supersede {
			c.superseded++
			var m *memory.Message
			if e.Text != nil {
				// The new text takes the message's Seq, its Stamp and its
				// Amend: the stamps after it sum the history as before,
				// the Amend what changed (a later Edit of it reads both).
				// The old text moves to a superseded row (MoveTo, PlanSave).
				t := e.Text.Bare()
				t.Tenant, t.User, t.Conversation = ex.Tenant, ex.User, ex.Conversation
				t.Seq, t.Key = e.Seq, memory.Key(ex.ID, len(ex.Prior)+len(ex.Turn)+1+len(revised))
				// It was said where and when the old text was: what
				// derives from it (a fact) is dated among the chat's
				// other statements as the old text was.
				t.CreatedAt = cmp.Or(r.Said, at)
				m, out[len(out)-1].Revise = &t, true
				revised, stamps = append(revised, t), append(stamps, memory.Stamp{Known: true, Pos: e.Pos, Digest: e.Digest})
				c.appended++
			} else {
				r.Known = false
			}
			c.Tail = replace(c.Tail, e.Seq, m)
			if !c.HeadAll {
				c.Head = replace(c.Head, e.Seq, m)
			}
		}
		c.Edited[e.Seq] = r
	}
	return out, revised, stamps
}

// replace returns a copy of msgs with the message seq replaced by m, or
// dropped when m is nil.
func replace(msgs []memory.Message, seq int64, m *memory.Message) []memory.Message {
	k := slices.IndexFunc(msgs, func(x memory.Message) bool { return x.Seq == seq })
	if k < 0 {
		return msgs
	}
	msgs = slices.Clone(msgs)
	if m == nil {
		return slices.Delete(msgs, k, k+1)
	}
	msgs[k] = *m
	return msgs
}

// AmendRow is a write a save plans for an Edit that holds: the message
// Seq carries Amend (zero: none) and, when Supersede, leaves the live
// branch with its recall items. When Revise, the edited message's new
// text is stored in its place (SavePlan.Result.Revised, with Amend): the
// old row first moves to seq MoveTo, past every other, superseded and
// without an Amend, so the new text lists where the old one did.
type AmendRow struct {
	Seq       int64
	Amend     memory.Digest
	Supersede bool
	Revise    bool
	MoveTo    int64
}

// NeedsRewound reports whether a save of ex into c must read the live
// message its Rewind names (SetRewound) before PlanSave.
func (c *SaveConv) NeedsRewound(ex memory.Exchange) bool {
	if ex.Rewind == nil {
		return false
	}
	_, ok := c.Rewound[ex.Rewind.Seq]
	return !ok
}

// SetRewound records the live message seq as read, with its stamp
// (st.Known false when it is not live or has none) and how many live
// messages the conversation holds from it on.
func (c *SaveConv) SetRewound(seq int64, st memory.Stamp, live int) {
	if c.Rewound == nil {
		c.Rewound = map[int64]Rewound{}
	}
	c.Rewound[seq] = Rewound{Stamp: st, Live: live, appended: c.appended, superseded: c.superseded}
}

// rewind returns how many live messages a save superseding from ex's
// Rewind takes out of c's live branch, and whether it holds: c was read
// with that message live, at the Rewind's position with its digest.
func (c *SaveConv) rewind(ex memory.Exchange) (int, bool) {
	if ex.Rewind == nil {
		return 0, false
	}
	r, ok := c.Rewound[ex.Rewind.Seq]
	if !ok || !r.Known || r.Pos != ex.Rewind.Pos || r.Digest != ex.Rewind.Digest {
		return 0, false
	}
	return r.Live + (c.appended - r.appended) - (c.superseded - r.superseded), true
}

// forget drops the rewound messages from seq on, which a save took out of
// the live branch.
func (c *SaveConv) forget(seq int64) {
	for s := range c.Rewound {
		if s >= seq {
			delete(c.Rewound, s)
		}
	}
}

// SetTail sets Tail to tail, read as the conversation's up to limit newest
// live messages: when it holds fewer, it holds every one, and is the Head
// too (sharing its array, which PlanSave only ever appends to past either
// slice's length).
func (c *SaveConv) SetTail(tail []memory.Message, limit int) {
	c.Tail = tail
	if len(tail) < limit {
		c.Head, c.HeadAll = tail[:len(tail):len(tail)], true
	}
}

// SetHead sets Head to head, read as the conversation's up to limit first
// live messages.
func (c *SaveConv) SetHead(head []memory.Message, limit int) {
	c.Head, c.HeadAll = head, len(head) < limit
}

// NeedsHead reports whether a save of ex into c must read the
// conversation's first HeadLen(ex) live messages (SetHead) before
// PlanSave: ex carries a BranchSeed, and c holds neither every live
// message nor that many of the first.
func (c *SaveConv) NeedsHead(ex memory.Exchange) bool {
	n := HeadLen(ex)
	return n > 0 && !c.HeadAll && len(c.Head) < n
}

// SavePlan is how a save stores one exchange (PlanSave).
type SavePlan struct {
	// Result is the exchange's result: Dropped or Duplicate, or Inserted,
	// Superseded and Stored, the messages to append as planned (each store
	// then gives them its own precision and Raw).
	Result memory.SaveResult
	// SupersedeFrom, when positive, is the seq from which the conversation's
	// live messages leave the live branch, their recall items with them,
	// before the new messages are appended.
	SupersedeFrom int64
	// Stamps are the Stamp of each of Result.Stored, in order.
	Stamps []memory.Stamp
	// Amends are the Edits that hold, written before the new messages
	// (each one superseded is counted in Result.Superseded).
	Amends []AmendRow
	// RevisedStamps are the Stamp of each of Result.Revised, in order
	// (each written with its AmendRow's Amend).
	RevisedStamps []memory.Stamp
	// ClearAmendsFrom, when a Rewind holds, is its position: the Amends
	// of the conversation's messages at or past it go with the branch
	// it supersedes (-1: none).
	ClearAmendsFrom int
}

// Unsaid returns the seqs where the texts p's Amends take off the live
// branch lie once p is written (an edited message's old text, at MoveTo
// when its new text takes its seq), oldest edit first; nil when none. The
// facts only those texts stated go with them (a store's retractFacts), as
// their recall items do: the user no longer says them.
func (p SavePlan) Unsaid() []int64 {
	var out []int64
	for _, a := range p.Amends {
		switch {
		case a.Revise:
			out = append(out, a.MoveTo)
		case a.Supersede:
			out = append(out, a.Seq)
		}
	}
	return out
}

// Unsummarised returns what p takes off the live branch, numbered as
// before p is written: the seqs of the messages its Amends supersede
// (an edited message's old text, where it lay, or a deleted one), oldest
// edit first, and SupersedeFrom (0: none), from which on every live
// message goes. A summary version covering one of them (FromSeq <= seq
// <= ToSeq, or ToSeq >= SupersedeFrom) summarises what the user no longer
// says: a store deletes it, with its recall items, in p's transaction
// (storetest.Knowledge), so the latest version left covers only live
// messages and compaction writes the next from the live branch. An
// amended tool result (role tool or function) is the exception: a client
// that trims its old tool results does so on nearly every request, and
// would otherwise have the summary written again from there each time;
// the summary keeps what it said of the result.
func (p SavePlan) Unsummarised() (seqs []int64, from int64) {
	for _, a := range p.Amends {
		if a.Supersede || a.Revise {
			seqs = append(seqs, a.Seq)
		}
	}
	return seqs, p.SupersedeFrom
}

// PlanSave decides how ex, which happened at at (never zero), is stored
// into conv by the store contract (storetest.Store), and advances conv:
//   - Dropped when its user was erased at or after at (erased; zero: never),
//     or conv was deleted at or after ex was received (Received);
//   - Duplicate when the store found it stored (stored: in its conversation,
//     or in its candidate conversation, where Adopt may have moved it), or
//     it was planned into conv before;
//   - Parted, nothing planned, when it carries a BranchSeed and conv's
//     first live messages (conv.Head) part from the history it resends
//     (memory.Parts): it belongs in a branch of its conversation;
//   - else, when its Rewind holds (the live message it names is as the
//     Capturer read it, conv.Rewound), the live messages from that one on
//     are superseded and its window (memory.Exchange.Window) is new;
//   - else its Edits that hold (each message as the Capturer read it,
//     conv.Edited) amend their messages and supersede the edited ones
//     (Amends), storing the new text of each that carries one at its seq
//     (Result.Revised, RevisedStamps; the old row moves to a seq after
//     the new messages', AmendRow.MoveTo), and the history it resends is aligned with conv's tail
//     (memory.Align; a named conversation's history that changed only its
//     first message, every message after it resent as stored, two at
//     least, one of them the user's, supersedes the branch from there,
//     editsFirst: anything less is stored beside it), the branch it
//     replaced is superseded, and the new
//     messages (the history not stored yet, the turn, the reply) are
//     appended after conv.LastSeq, with ex's identity, the keys
//     memory.Key(ex.ID, i) and their own CreatedAt (at when zero), and
//     their Stamps (memory.Stamps).
func PlanSave(ex memory.Exchange, at, erased time.Time, stored bool, conv *SaveConv) SavePlan {
	p := SavePlan{ClearAmendsFrom: -1}
	switch {
	case !erased.IsZero() && !erased.Before(at), DeletedSince(ex, conv.Deleted):
		p.Result.Dropped = true
		return p
	case stored || conv.saved[ex.ID]:
		p.Result.Duplicate = true
		return p
	case ex.BranchSeed != "" && parts(conv.Head, ex):
		p.Result.Parted = true
		return p
	}
	if conv.saved == nil {
		conv.saved = map[string]bool{}
	}
	conv.saved[ex.ID] = true
	var plan memory.Plan
	rewound, rewind := conv.rewind(ex)
	switch {
	case rewind:
		// The client changed its history where the exchange left it out:
		// the stored branch from there on goes, the window follows.
		plan = memory.Plan{SupersedeFrom: ex.Rewind.Seq, Prior: ex.Window()}
		p.ClearAmendsFrom = ex.Rewind.Pos
	case len(ex.Prior) > 0:
		// Edits in the part left out, each on its own, the history after
		// them unchanged: the edited messages go, the rest stays.
		p.Amends, p.Result.Revised, p.RevisedStamps = conv.edits(ex, at)
		for _, a := range p.Amends {
			if a.Supersede {
				p.Result.Superseded++
			}
		}
		plan = align(ex, conv)
	}
	if plan.SupersedeFrom > 0 {
		// The tail holds the newest live messages, so every live message
		// from SupersedeFrom on is in it, unless a Rewind reaches further.
		kept := slices.IndexFunc(conv.Tail, func(m memory.Message) bool { return m.Seq >= plan.SupersedeFrom })
		if kept < 0 {
			kept = len(conv.Tail)
		}
		p.SupersedeFrom, p.Result.Superseded = plan.SupersedeFrom, p.Result.Superseded+len(conv.Tail)-kept
		if rewind {
			p.Result.Superseded = rewound
		}
		conv.superseded += p.Result.Superseded
		conv.forget(plan.SupersedeFrom)
		conv.Tail = conv.Tail[:kept:kept]
		// Head is a run of live messages from the first: one that reaches
		// SupersedeFrom now holds every live message.
		if k := slices.IndexFunc(conv.Head, func(m memory.Message) bool { return m.Seq >= plan.SupersedeFrom }); k >= 0 {
			conv.Head, conv.HeadAll = conv.Head[:k:k], true
		}
	}
	msgs := make([]memory.Message, 0, len(plan.Prior)+len(ex.Turn)+1)
	msgs = append(append(append(msgs, plan.Prior...), ex.Turn...), ex.Reply)
	for k := range msgs {
		m := &msgs[k]
		*m = m.Bare() // as a store reads it back: without what ParseMessage kept
		conv.LastSeq++
		m.Tenant, m.User, m.Conversation = ex.Tenant, ex.User, ex.Conversation
		m.Seq, m.Key = conv.LastSeq, memory.Key(ex.ID, k)
		if m.CreatedAt.IsZero() {
			m.CreatedAt = at
		}
	}
	// An edited message's old text moves past every seq planned, so its
	// new text can take its place.
	for k := range p.Amends {
		if p.Amends[k].Revise {
			conv.LastSeq++
			p.Amends[k].MoveTo = conv.LastSeq
		}
	}
	conv.Tail = append(conv.Tail, msgs...)
	conv.appended += len(msgs)
	p.Stamps = memory.Stamps(ex, len(msgs))
	if conv.HeadAll {
		conv.Head = append(conv.Head, msgs...)
	}
	conv.Latest = maxTime(conv.Latest, at)
	p.Result.Inserted, p.Result.Stored = len(msgs), msgs
	return p
}

// align is how the history ex resends joins conv's live messages. A whole
// history is aligned with conv's tail (memory.Align). A history cut by
// memory.CutHistory (ex.Skipped) aligns its window of newest messages with
// the tail, so a client that resends its whole history, turn after turn,
// finds the run stored by its previous turn and stores only what is new;
// while conv holds fewer live messages than the cut's head (a new
// conversation: all of them are in conv.Head), the head is aligned with
// them as a whole history would be and the window follows it, so the
// conversation starts as its client's history does (memory.Parts compares
// its first messages).
func align(ex memory.Exchange, conv *SaveConv) memory.Plan {
	if ex.Skipped == 0 {
		tail := conv.Tail[max(0, len(conv.Tail)-TailLen(ex)):]
		plan := memory.Align(tail, ex.Prior)
		if from := editsFirst(ex, conv, tail, plan); from > 0 {
			plan.SupersedeFrom = from
		}
		return plan
	}
	if conv.HeadAll && len(conv.Head) < memory.BranchHead {
		plan := memory.Align(conv.Head, ex.Prior[:memory.BranchHead])
		window := ex.Window()
		msgs := make([]memory.Message, 0, len(plan.Prior)+len(window))
		plan.Prior = append(append(msgs, plan.Prior...), window...)
		return plan
	}
	return memory.Align(conv.Tail[max(0, len(conv.Tail)-TailLen(ex)):], ex.Window())
}

// editsFirst returns the seq of conv's first live message when the
// history ex resends edits the conversation from its very first message,
// else 0. A named conversation's client (not Derived: the conversation does
// not follow from its first message) that resends a history matching none
// of the stored branch (memory.Align found no run: every run starts at the
// history's first message) changed that first message only on strong
// evidence (resentAsStored): compared whole (tail starts at conv's first
// live message), every message it resends after the first is the stored
// one at its position, at least two of them, one a user's message with
// text. Then the stored branch is superseded from its start, as an edit
// of a later message supersedes from there. Anything less is stored after
// the branch, which stays live: a duplicate is the safe way, superseding a
// real history is not. Another chat sent under the same name resends at
// first [its first message, its first reply], and that reply may well be
// the stored one's (a greeting): one reply matching is no edit; nor are a
// history that shares not even the second message (another chat, or one
// whose client summarised its first messages into one), one that resends
// a later message otherwise, or more messages than the branch holds (what
// it holds beyond them cannot be compared). A derived conversation never
// gets here with another first message (it would derive another
// conversation); nor does the default one, whose requests resend no
// history.
func editsFirst(ex memory.Exchange, conv *SaveConv, tail []memory.Message, plan memory.Plan) int64 {
	switch {
	case ex.Derived, ex.BranchSeed != "", ex.Conversation == memory.DefaultConversation,
		plan.SupersedeFrom > 0, len(plan.Prior) < len(ex.Prior),
		!conv.HeadAll, len(conv.Head) == 0, len(tail) == 0, conv.Head[0].Seq != tail[0].Seq,
		!resentAsStored(ex.Prior, tail):
		return 0
	}
	return tail[0].Seq
}

// resentAsStored reports whether prior, a resent history, repeats stored,
// a conversation's live messages from its first, after their first
// message, by Fingerprint (memory.ResendsRest); a history longer than
// stored cannot be compared whole and does not.
func resentAsStored(prior, stored []memory.Message) bool {
	return len(prior) <= len(stored) && memory.ResendsRest(prior, len(prior), func(i int) bool {
		return prior[i].Fingerprint() == stored[i].Fingerprint()
	})
}

// parts reports whether head, a conversation's first live messages, parts
// from the history ex resends (ex.Head: its Prior and Turn, or the first
// memory.BranchHead messages of a cut one; memory.Parts).
func parts(head []memory.Message, ex memory.Exchange) bool {
	return memory.Parts(head, ex.Head()) >= 0
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// DeadLetter returns d as a store checks and writes it: At now when zero,
// Received At when zero, a nil Payload empty. A store writes nothing for
// d when its user was erased at or after d.At, or its conversation deleted
// at or after d.Received (DeletedSince): a dead letter set aside after the
// erasure or deletion removed the others must not keep their text at rest.
// An exchange queued without Received is judged by when it was said, as
// the engine's purge of the queues judges it.
func DeadLetter(d memory.DeadLetter, now time.Time) memory.DeadLetter {
	if d.At.IsZero() {
		d.At = now
	}
	if d.Received.IsZero() {
		d.Received = d.At
	}
	if d.Payload == nil {
		d.Payload = []byte{}
	}
	return d
}

// DeletedSince reports whether ex was received (memory.Exchange.Received)
// at or before deleted, when its conversation was last deleted (zero:
// never): then its save is dropped. An exchange without Received is never
// dropped by a deletion (a replay of dated history, as before).
func DeletedSince(ex memory.Exchange, deleted time.Time) bool {
	return !deleted.IsZero() && !ex.Received.IsZero() && !deleted.Before(ex.Received)
}

// AmendOf returns the Amend a message carries, read from its amend
// column: zero when NULL or not a memory.Digest's size.
func AmendOf(amend []byte) memory.Digest {
	var d memory.Digest
	if len(amend) == len(d) {
		d = memory.Digest(amend)
	}
	return d
}

// AmendArg returns d as an amend column's value: nil (NULL) when zero.
func AmendArg(d memory.Digest) []byte {
	if d == (memory.Digest{}) {
		return nil
	}
	return d[:]
}

// StampOf returns the Stamp a message was stored with, read from its pos
// and digest columns: unknown when either is NULL or the digest is not a
// memory.Digest's size.
func StampOf(pos *int64, digest []byte) memory.Stamp {
	var st memory.Stamp
	if pos == nil || len(digest) != len(st.Digest) {
		return st
	}
	return memory.Stamp{Known: true, Pos: int(*pos), Digest: memory.Digest(digest)}
}
