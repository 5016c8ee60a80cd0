package prompt

import (
	"context"
	"fmt"
	"sync"

	"github.com/memgate/memgate/internal/memory"
)

// HeadReader reads a conversation's first live messages (rev: see
// HistoryReader): internal/engine/cache's Reads, which keeps them under
// the user's revision counters and extends them with the chat's own
// saves, so a chat that goes on is not read again.
type HeadReader interface {
	// HeadHeld returns up to n first live messages, oldest first, as
	// memory.Held. The slice is shared and must not be written to.
	HeadHeld(ctx context.Context, rev *memory.Revisions, id memory.Identity, n int) ([]memory.Held, error)
}

// headCheck bounds how many of a conversation's first live messages a
// full-history request's resent history is checked against (head): an
// edit past them, deep in a chat of thousands of messages, is found by
// the request's save alone, which drops what the old text said (the
// summary covering it, its facts and passages) from the next request's
// prompt on. The messages are read as prints (memory.Held), kept in the
// cache under the user's revisions and extended by the chat's own saves
// (HeadReader): a chat that goes on reads them from the store once.
const headCheck = 4096

// head reads the first live messages of id's conversation, up to
// headCheck, as memory.Held, through a.deps.Heads as of rev (the
// request's revision counters): what a full-history request's resent
// history is checked against for edits, as its save will judge it after
// its prompt is sent (editsSummary: the summary; unsaid: the messages
// whose text it takes back). The slice is shared and must not be written
// to.
func (a *Assembler) head(ctx context.Context, rev *memory.Revisions, id memory.Identity) ([]memory.Held, error) {
	held, err := a.deps.Heads.HeadHeld(ctx, rev, id, headCheck)
	if err != nil {
		return nil, fmt.Errorf("read the conversation's first messages: %w", err)
	}
	return held, nil
}

// headRead is the read of a conversation's first messages (head) for a
// full-history request's edit check, made at most once: started while the
// other parts load, as soon as one shows the check is needed (start), and
// waited for by whichever needs its result (wait). A read started for a
// check the loaded memory then does not need is left to its context.
type headRead struct {
	once sync.Once
	read func() ([]memory.Held, error)
	done chan struct{}
	held []memory.Held
	err  error
}

// newHeadRead returns a headRead that reads with read, not yet started.
func newHeadRead(read func() ([]memory.Held, error)) *headRead {
	return &headRead{read: read, done: make(chan struct{})}
}

// start starts the read unless it is under way.
func (h *headRead) start() {
	h.once.Do(func() {
		go func() {
			h.held, h.err = h.read()
			close(h.done)
		}()
	})
}

// wait starts the read unless it is under way and returns its result, or
// ctx's error if ctx ends first. The slice is shared and must not be
// written to.
func (h *headRead) wait(ctx context.Context) ([]memory.Held, error) {
	h.start()
	select {
	case <-h.done:
		return h.held, h.err
	case <-ctx.Done():
		return nil, fmt.Errorf("read the conversation's first messages: %w", ctx.Err())
	}
}

// judged returns the parts of held (a conversation's first live
// messages) and of a full-history request's messages (client: before its
// current turn; all: with it) that the edit check compares: all of them,
// or, of a history longer than one request stores (Options.HistoryKeep,
// memory.CutHistory), the first memory.BranchHead of each. Such a history
// is stored as its first messages and a window of its newest, which its
// save aligns with the conversation's newest: held does not show it in
// order past its first messages, and an edit there is left to the save.
func (a *Assembler) judged(held []memory.Held, client, all []memory.Message) ([]memory.Held, []memory.Message, []memory.Message) {
	if memory.Unstored(len(client), a.opts.HistoryKeep) == 0 {
		return held, client, all
	}
	n := memory.BranchHead
	return held[:min(n, len(held))], client[:min(n, len(client))], all[:min(n, len(all))]
}

// editsSummary reports whether storing client (a full-history request's
// non-system messages before its current turn) after held (its
// conversation's first live messages, oldest first) would take a message
// the summary through toSeq covers off the live branch: the judgement the
// request's save makes (memory.Align; contract.SavePlan.Unsummarised,
// which then deletes the summary versions covering it). Client is matched
// against held's covered messages at the offset where the longest run of
// equal messages starts (the latest on ties), so a client that resends
// only a window of its history is matched where its window starts;
// messages are equal by Fingerprint, the client's as memgate stores it
// (form: sanitized and redacted; nil: as sent) when it differs as sent.
// Two tool results are equal whatever they say: a client that trims its
// old tool results does so on nearly every request, and the save keeps
// the summary for it. The summary is edited when the run stops inside the
// covered messages: the client changed, dropped or inserted a message
// there, or its history ends there (a rewind). With no run, it is edited
// when the client resends the conversation's second message as stored
// (the first changed: the save supersedes the branch from its start);
// a client sharing not even that edits nothing, all of its history is
// new to the save.
func editsSummary(held []memory.Held, toSeq int64, client []memory.Message, form func(memory.Message) memory.Message) bool {
	covered := len(held)
	for covered > 0 && held[covered-1].Seq > toSeq {
		covered--
	}
	if covered == 0 || len(client) == 0 {
		return false
	}
	bestOff, bestLen := bestRun(held[:covered], client, form)
	if bestOff < 0 {
		// No run: a history that resends the rest as stored changed the
		// first message (contract's editsFirst), which the summary
		// covers; any other is another chat's.
		return resentAsStored(client, held, form)
	}
	return bestOff+bestLen < covered
}

// bestRun returns where client (a full-history request's non-system
// messages before its current turn) is matched against held (its
// conversation's first live messages, oldest first): the offset in held
// where the longest run of equal messages starts (the latest on ties), and
// its length; -1 and 0 when no message of client's is one of held's.
// Messages are equal as editsSummary tells.
func bestRun(held []memory.Held, client []memory.Message, form func(memory.Message) memory.Message) (off, n int) {
	// A run from any offset is at most len(held) long: the client's later
	// messages never decide it.
	client = client[:min(len(client), len(held))]
	const tool = 0
	ids := make(map[[16]byte]int, len(held))
	seq := make([]int, 0, len(client)+1+len(held))
	for _, h := range held {
		if _, ok := ids[h.Sum]; !ok && !h.Tool {
			ids[h.Sum] = len(ids) + 1
		}
	}
	fresh := len(ids) + 1 // ids no held message has
	number := func(m memory.Message) int {
		if memory.IsResult(m.Role) {
			return tool
		}
		if id, ok := ids[m.Print().Sum]; ok {
			return id
		}
		if form != nil {
			if id, ok := ids[form(m).Print().Sum]; ok {
				return id
			}
		}
		fresh++
		return fresh
	}
	for _, m := range client {
		seq = append(seq, number(m))
	}
	seq = append(seq, -1) // matches no message: a run never crosses it
	for _, h := range held {
		id := tool
		if !h.Tool {
			id = ids[h.Sum]
		}
		seq = append(seq, id)
	}
	off, n = -1, 0
	for o, k := range memory.Runs(seq, len(client)) {
		if k > 0 && k >= n {
			off, n = o, k
		}
	}
	return off, n
}

// unsaid returns the keys of the messages of held (a conversation's first
// live messages, oldest first) whose text storing client (a full-history
// request's non-system messages before its current turn) takes off the
// live branch, nil when none: the messages from where client's run
// (bestRun) stops that client does not resend as stored at the same
// position — edited, or dropped — or, with no run, the first message when
// the rest is resent as stored (resentAsStored). The facts only those
// texts stated are what the request's save retracts (the store's
// retractFacts); a message client resends unchanged after an edit still
// states what it did. Two tool results are equal whatever they say, as
// bestRun takes them.
func unsaid(held []memory.Held, client []memory.Message, form func(memory.Message) memory.Message) map[string]bool {
	if len(held) == 0 || len(client) == 0 {
		return nil
	}
	off, n := bestRun(held, client, form)
	at := off + n
	if off < 0 {
		if !resentAsStored(client, held, form) {
			return nil
		}
		off, at = 0, 0
	}
	var gone map[string]bool
	for i := at; i < len(held); i++ {
		h := held[i]
		if j := i - off; j < len(client) && (h.Tool && memory.IsResult(client[j].Role) || resends(client[j], h, form)) {
			continue
		}
		if h.Key == "" {
			continue
		}
		if gone == nil {
			gone = map[string]bool{}
		}
		gone[h.Key] = true
	}
	return gone
}

// usersUnsaid is unsaid less the assistant replies: a client may resend
// a reply otherwise than memgate stored it (its thinking left out,
// trimmed, reformatted), on every request, which is no edit of what the
// user said, as routing holds (memory.Print.Diverges). An edit of a
// message no summary covers takes back what the user's own messages
// stated; what a changed reply stated is left to the save.
func usersUnsaid(held []memory.Held, client []memory.Message, form func(memory.Message) memory.Message) map[string]bool {
	gone := unsaid(held, client, form)
	for _, h := range held {
		if h.Assistant {
			delete(gone, h.Key)
		}
	}
	if len(gone) == 0 {
		return nil
	}
	return gone
}

// resentAsStored reports whether sent, a client's history whose first
// message matches no stored one, resends the messages held has (the
// conversation's first ones, those the summary covers) as stored
// (memory.ResendsRest, the bar of contract's editsFirst; the save also
// compares the messages after held's).
func resentAsStored(sent []memory.Message, held []memory.Held, form func(memory.Message) memory.Message) bool {
	return memory.ResendsRest(sent, min(len(sent), len(held)), func(i int) bool { return resends(sent[i], held[i], form) })
}

// resends reports whether m, a client's message, is h as stored (as sent,
// or as form stores it).
func resends(m memory.Message, h memory.Held, form func(memory.Message) memory.Message) bool {
	if m.Print().Sum == h.Sum {
		return true
	}
	return form != nil && form(m).Print().Sum == h.Sum
}
