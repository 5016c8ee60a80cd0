package cache

import (
	"context"

	"github.com/memgate/memgate/internal/memory"
)

// head is a conversation's first live messages, oldest first, as prints
// (all: every live one), never modified once held: a save extends a copy.
type head struct {
	prints []memory.Print
	all    bool
}

// Head returns the prints (memory.Print) of a conversation's up to n first
// live messages, oldest first: what routing compares a request's history
// with (see record.Router). It keeps them under rev.Tail(), as Recent keeps
// tails, so a chat that goes on reads them from the store once: its saves
// extend them (Saved). A nil rev reads through. The slice is shared and
// must not be written to.
func (r *Reads) Head(ctx context.Context, rev *memory.Revisions, id memory.Identity, n int) ([]memory.Print, error) {
	if rev == nil || n <= 0 {
		msgs, err := r.src.MessagesAfter(ctx, id, 0, n)
		if err != nil {
			return nil, err
		}
		return prints(msgs), nil
	}
	key := convKey{id.Tenant, id.User, rev.Tail(), id.Conversation}
	if h, ok := r.heads.Get(key); ok && (len(h.prints) >= n || h.all) {
		return h.prints[:min(n, len(h.prints))], nil
	}
	msgs, err := r.src.MessagesAfter(ctx, id, 0, n)
	if err != nil {
		return nil, err
	}
	h := head{prints: prints(msgs), all: len(msgs) < n}
	r.heads.Put(key, h)
	return h.prints, nil
}

// extended returns h after stored were appended to its conversation: the
// same first messages, and, when h held every one, stored's after them.
func (h head) extended(stored []memory.Message) head {
	if !h.all {
		return h
	}
	return head{prints: append(h.prints[:len(h.prints):len(h.prints)], prints(stored)...), all: true}
}

func prints(msgs []memory.Message) []memory.Print {
	out := make([]memory.Print, len(msgs))
	for i, m := range msgs {
		out[i] = m.Print()
	}
	return out
}

// headSize is roughly what a held head takes, in bytes.
func headSize(k convKey, h head) int { return 64 + len(k.Of) + 17*len(h.prints) }
