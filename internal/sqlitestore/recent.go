package sqlitestore

import (
	"context"
	"fmt"
	"slices"

	"github.com/memgate/memgate/internal/itemindex"
	"github.com/memgate/memgate/internal/memory"
)

// tailKeep is how many of a conversation's newest live messages the Store
// keeps in memory (at least: a Recent asking for more keeps what it read).
const tailKeep = 64

// defaultTailBytes bounds the conversations' tails a Store keeps, over all
// users: 8 MiB, about 25,000 messages of 300 bytes.
const defaultTailBytes = 8 << 20

// tail is a conversation's newest live messages, oldest first, as held in
// a Store's tails. Its messages are never modified once held: a save
// appends to a new slice header (append may share the backing array past
// the held length, which no reader of the held tail looks at).
type tail struct {
	msgs []memory.Message
	// all is set when msgs are all of the conversation's live messages.
	all bool
}

// tailSize is roughly what one held tail takes in memory, in bytes.
func tailSize(conv string, t tail) int {
	n := 64 + len(conv)
	for _, m := range t.msgs {
		// The identity's strings are shared by the conversation's messages.
		n += 160 + len(m.Key) + len(m.Role) + len(m.Content) + len(m.Raw)
	}
	return n
}

// messagesState is a count that every change of the user's messages moves
// and that never goes back, so that equal counts name the same messages:
// migration 0014's messages_added (every insert) plus 0013's
// messages_changed (every update and delete).
func messagesState(rev itemindex.Revisions) int64 { return rev.MessagesAdded + rev.Messages }

// Recent returns up to n newest live messages of the conversation, oldest
// first; none (and no error) for n <= 0 or an unknown conversation.
//
// The newest messages of a conversation are kept in memory as of the
// user's messages count (messagesState), read once per request when ctx
// carries a memory.Memo (the read recall's searches share), and read
// again from the file when it has moved: by another Store's or process's
// write, an erasure, a retention delete, an edit in SQL. This Store's own
// saves that only append to a conversation append to what it holds
// (advanceTails). The returned slice is the caller's; its messages' Raw is
// shared with the cache and must not be written to.
func (s *Store) Recent(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error) {
	if n <= 0 {
		return []memory.Message{}, nil
	}
	// The count is read before the messages, so messages read after a
	// change are never kept as of a count from before it.
	rev, err := itemindex.ReadRevisions(ctx, indexSource{s}, id.Tenant, id.User)
	if err != nil {
		// Without the count nothing held can be trusted, nor kept.
		msgs, err := liveTail(ctx, s.reads, id, n)
		if err != nil {
			return nil, fmt.Errorf("recent messages: %w", err)
		}
		return msgs, nil
	}
	count := messagesState(rev)
	keys := [1]string{id.Conversation}
	var held [1]tail
	var ok [1]bool
	if s.tails.Fill(id.Tenant, id.User, count, keys[:], held[:], ok[:]) == 1 {
		if t := held[0]; len(t.msgs) >= n || t.all {
			return slices.Clone(t.msgs[max(0, len(t.msgs)-n):]), nil
		}
	}
	limit := max(n, tailKeep)
	msgs, err := liveTail(ctx, s.reads, id, limit)
	if err != nil {
		return nil, fmt.Errorf("recent messages: %w", err)
	}
	s.tails.Put(id.Tenant, id.User, count, func(yield func(string, tail) bool) {
		yield(id.Conversation, tail{msgs: msgs, all: len(msgs) < limit})
	})
	return slices.Clone(msgs[max(0, len(msgs)-n):]), nil
}

// appended is what one write transaction inserted for one user, for
// advanceTails.
type appended struct {
	tenant, user string
	// count is the user's messagesState read in the transaction after its
	// inserts; inserted how many messages the transaction inserted.
	count    int64
	inserted int
	convs    []string                    // distinct, in first-save order
	stored   map[string][]memory.Message // per conversation, in Seq order
}

// sqlMessagesState reads a user's messagesState in a write transaction.
const sqlMessagesState = `SELECT messages_added + messages_changed FROM memory_item_revisions
	WHERE tenant = ? AND user_id = ?`

// appendedBy groups the messages results report stored by user and
// conversation (results[i] being exs[i]'s) and reads, in the transaction
// that stored them, each such user's messagesState.
func appendedBy(ctx context.Context, tx writeTx, exs []memory.Exchange, results []memory.SaveResult) ([]*appended, error) {
	var out []*appended
	for i, res := range results {
		if res.Inserted == 0 {
			continue
		}
		ex := exs[i]
		var a *appended
		for _, o := range out {
			if o.tenant == ex.Tenant && o.user == ex.User {
				a = o
				break
			}
		}
		if a == nil {
			a = &appended{tenant: ex.Tenant, user: ex.User, stored: map[string][]memory.Message{}}
			out = append(out, a)
		}
		a.inserted += res.Inserted
		if _, seen := a.stored[ex.Conversation]; !seen {
			a.convs = append(a.convs, ex.Conversation)
		}
		a.stored[ex.Conversation] = append(a.stored[ex.Conversation], res.Stored...)
	}
	for _, a := range out {
		if err := tx.QueryRowContext(ctx, sqlMessagesState, a.tenant, a.user).Scan(&a.count); err != nil {
			return nil, fmt.Errorf("read messages count: %w", err)
		}
	}
	return out, nil
}

// advanceTails brings the tails held of the users a committed write
// transaction appended to (appendedBy) to the transaction's counts. A
// user held at exactly count-inserted was held as of the state just
// before the transaction and the transaction did nothing else to their
// messages (any supersede, update or delete, or any insert not reported,
// moves the count further, and the counts of other states differ: the
// count only grows and the writer is one at a time), so the stored
// messages are appended to each of their conversations held. Otherwise
// the user's tails, stale, are dropped. Messages already held (a Recent
// that read the file after the commit, keeping what it read as of the
// count it read before) are not appended again.
func (s *Store) advanceTails(done []*appended) {
	for _, a := range done {
		s.tails.Advance(a.tenant, a.user, a.count-int64(a.inserted), a.count, a.convs,
			func(conv string, t tail) (tail, bool) {
				limit := max(len(t.msgs), tailKeep)
				msgs := t.msgs
				for _, m := range a.stored[conv] {
					if len(msgs) == 0 || m.Seq > msgs[len(msgs)-1].Seq {
						msgs = append(msgs, m)
					}
				}
				all := t.all
				if len(msgs) > limit {
					msgs, all = msgs[len(msgs)-limit:], false
				}
				return tail{msgs: msgs, all: all}, true
			})
	}
}
