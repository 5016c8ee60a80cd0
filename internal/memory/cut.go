package memory

// BranchHead is how many of a derived conversation's first messages tell
// its chats apart: Parts is asked of at most that many (the Router's
// routing and a save's check, so both agree), and a history cut by
// CutHistory keeps them. A chat whose client edits a message past them
// supersedes in place, as in a named conversation.
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

// Head returns the part of ex's history (Prior, then Turn) that is its
// client's first messages, at most BranchHead of them: what Parts
// compares with its conversation's first messages.
func (ex Exchange) Head() []Message {
	n := min(BranchHead, len(ex.Prior)+len(ex.Turn))
	head := make([]Message, 0, n)
	head = append(head, ex.Prior[:min(n, len(ex.Prior))]...)
	return append(head, ex.Turn[:n-len(head)]...)
}
