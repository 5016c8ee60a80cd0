package memory

// BranchHead is how many of a client's first messages a history cut by
// CutHistory keeps, and all that tells a derived conversation's chats
// apart when their history is cut: Parts is then asked of those only (by
// the Router and by a save, so both agree), since the conversation holds
// no more of the history's start in order. A client that edits a message
// past them in such a chat supersedes in place, as in a named
// conversation.
const BranchHead = 256

// CutHistory bounds the resent history prior (an exchange's Prior) that
// one request stores and aligns to its first BranchHead messages and its
// keep newest ones. It returns prior itself, and skipped 0, when it holds
// no more than that; else a new slice of those messages, and how many it
// left out between them (Exchange.Skipped). The cut moves with the
// history: the next turn of a client that resends its whole history keeps
// the same first messages and a window two messages further on, which a
// save aligns with what it stored (Align) and stores only what is new.
// keep below 1 cuts nothing.
func CutHistory(prior []Message, keep int) (cut []Message, skipped int) {
	if skipped = Unstored(len(prior), keep); skipped == 0 {
		return prior, 0
	}
	cut = make([]Message, 0, BranchHead+keep)
	cut = append(append(cut, prior[:BranchHead]...), prior[len(prior)-keep:]...)
	return cut, skipped
}

// Unstored is how many messages of a resent history of n messages
// CutHistory leaves out when it keeps keep newest ones.
func Unstored(n, keep int) int {
	if keep < 1 || n <= BranchHead+keep {
		return 0
	}
	return n - BranchHead - keep
}

// Window returns the part of ex.Prior a save aligns with its conversation's
// newest messages (Align): the newest messages CutHistory kept, or all of
// Prior when nothing was cut.
func (ex Exchange) Window() []Message {
	if ex.Skipped > 0 && len(ex.Prior) > BranchHead {
		return ex.Prior[BranchHead:]
	}
	return ex.Prior
}

// Head returns the part of ex's history (Prior, then Turn) that Parts
// compares with its conversation's first messages: all of it, or, when
// CutHistory cut it, its first BranchHead messages.
func (ex Exchange) Head() []Message {
	if ex.Skipped > 0 && len(ex.Prior) >= BranchHead {
		return ex.Prior[:BranchHead:BranchHead]
	}
	head := make([]Message, 0, len(ex.Prior)+len(ex.Turn))
	return append(append(head, ex.Prior...), ex.Turn...)
}

// Cut is what one request's exchange stores of the request's messages:
// computed once per request (CutRequest) by whoever owns the request, and
// read, never recomputed, by everything that must agree on it: the check
// of the messages that may be stored, the report that capture leaves some
// out (X-Memory-Degraded: capture), routing (which compares Head, as the
// save does) and the exchange itself (Prior, Turn, Skipped).
type Cut struct {
	// Prior and Turn are the exchange's (Exchange.Prior, Exchange.Turn):
	// the request's non-system messages split at the last assistant one
	// (SplitAnswered), Prior cut by CutHistory.
	Prior, Turn []Message
	// Skipped is how many messages CutHistory left out (Exchange.Skipped).
	Skipped int
	// TurnSkipped is how many messages of the turn CutHistory left out
	// (Exchange.TurnSkipped): a turn longer than a resent history may be
	// is stored as such a history is, its first BranchHead and keep
	// newest messages.
	TurnSkipped int
	// From and To locate the messages left out in the request's messages
	// (system ones included): msgs[From:To] holds them, and the system
	// messages between them. From == To when none is.
	From, To int
}

// CutRequest returns the Cut of a request's messages msgs (system ones
// included) whose exchange stores, of its resent history, the first
// BranchHead and the keep newest messages (CutHistory; keep below 1 cuts
// nothing), and of its turn the same (TurnSkipped). It copies only the
// messages stored, and a cut turn once more.
func CutRequest(msgs []Message, keep int) Cut {
	n, prior := 0, 0 // non-system messages; those through the last assistant one
	for _, m := range msgs {
		if IsSystem(m.Role) {
			continue
		}
		if n++; m.Role == "assistant" {
			prior = n
		}
	}
	c := Cut{Skipped: Unstored(prior, keep)}
	if prior > 0 {
		c.Prior = make([]Message, 0, prior-c.Skipped)
	}
	if n > prior {
		c.Turn = make([]Message, 0, n-prior)
	}
	i := 0 // non-system messages before msgs[at]
	for at, m := range msgs {
		if IsSystem(m.Role) {
			continue
		}
		switch {
		case c.Skipped > 0 && i == BranchHead:
			c.From = at
		case c.Skipped > 0 && i == BranchHead+c.Skipped:
			c.To = at
		}
		switch {
		case c.Skipped > 0 && BranchHead <= i && i < BranchHead+c.Skipped:
		case i < prior:
			c.Prior = append(c.Prior, m)
		default:
			c.Turn = append(c.Turn, m)
		}
		i++
	}
	// A turn is never cut at a reply, so one as long as a history may be
	// (consecutive user or tool messages by the tens of thousands) is cut
	// as a history is: its first BranchHead and keep newest messages,
	// which end with the question.
	if skipped := Unstored(len(c.Turn), keep); skipped > 0 {
		c.Turn, c.TurnSkipped = CutHistory(c.Turn, keep)
	}
	return c
}

// Head returns the part of c's history that Parts compares with its
// conversation's first messages, as its exchange's Head does.
func (c Cut) Head() []Message {
	return Exchange{Prior: c.Prior, Turn: c.Turn, Skipped: c.Skipped}.Head()
}
