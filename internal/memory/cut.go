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

// UnstoredSpan returns the span msgs[from:to] of a request's messages
// (system ones included) whose non-system messages CutHistory leaves out
// of the exchange's resent history when it keeps keep newest ones: what
// capture never stores of the request. from == to when it stores them
// all.
func UnstoredSpan(msgs []Message, keep int) (from, to int) {
	prior := 0 // non-system messages through the last assistant one (SplitAnswered)
	seen := 0
	for _, m := range msgs {
		if IsSystem(m.Role) {
			continue
		}
		if seen++; m.Role == "assistant" {
			prior = seen
		}
	}
	if Unstored(prior, keep) == 0 {
		return 0, 0
	}
	n := 0 // non-system messages before msgs[i]
	for i, m := range msgs {
		if IsSystem(m.Role) {
			continue
		}
		switch n {
		case BranchHead:
			from = i
		case prior - keep:
			return from, i
		}
		n++
	}
	return from, len(msgs) // not reached: prior - keep < prior
}
