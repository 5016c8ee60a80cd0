package cache

import (
	"context"

	"github.com/memgate/memgate/internal/memory"
)

// head is a conversation's first live messages, oldest first, as
// memory.Held (all: every live one), never modified once held: a save
// extends a copy.
type head struct {
	held []memory.Held
	all  bool
}

// Head returns the prints (memory.Print) of a conversation's up to n first
// live messages, oldest first: what routing compares a request's history
// with (see record.Router). It keeps them under rev.Tail(), as Recent keeps
// tails, so a chat that goes on reads them from the store once: its saves
// extend them (Saved). A nil rev reads through.
func (r *Reads) Head(ctx context.Context, rev *memory.Revisions, id memory.Identity, n int) ([]memory.Print, error) {
	held, err := r.HeadHeld(ctx, rev, id, n)
	if err != nil {
		return nil, err
	}
	out := make([]memory.Print, len(held))
	for i, h := range held {
		out[i] = h.Print
	}
	return out, nil
}

// HeadHeld is Head with each message's Seq and whether it is a tool
// result (memory.Held): what the prompt checks a resent history for
// edits with (the summary's, and what the edited messages stated). The
// slice is shared and must not be written to.
func (r *Reads) HeadHeld(ctx context.Context, rev *memory.Revisions, id memory.Identity, n int) ([]memory.Held, error) {
	if rev == nil || n <= 0 {
		msgs, err := r.src.MessagesAfter(ctx, id, 0, n)
		if err != nil {
			return nil, err
		}
		return helds(msgs), nil
	}
	key := convKey{id.Tenant, id.User, rev.Tail(), id.Conversation}
	epoch := r.heads.Epoch()
	if h, ok := r.heads.Get(key); ok && (len(h.held) >= n || h.all) {
		return h.held[:min(n, len(h.held)):min(n, len(h.held))], nil
	}
	msgs, err := r.src.MessagesAfter(ctx, id, 0, n)
	if err != nil {
		return nil, err
	}
	h := head{held: helds(msgs), all: len(msgs) < n}
	r.heads.PutSince(epoch, key, h)
	return h.held[:len(h.held):len(h.held)], nil
}

// extended returns h after stored were appended to its conversation: the
// same first messages, and, when h held every one, stored's after them.
func (h head) extended(stored []memory.Message) head {
	if !h.all {
		return h
	}
	return head{held: append(h.held[:len(h.held):len(h.held)], helds(stored)...), all: true}
}

func helds(msgs []memory.Message) []memory.Held {
	out := make([]memory.Held, len(msgs))
	for i, m := range msgs {
		out[i] = m.Held()
	}
	return out
}

// headSize is roughly what a held head takes, in bytes.
func headSize(k convKey, h head) int {
	n := 64 + len(k.Of) + 56*len(h.held)
	for _, m := range h.held {
		n += len(m.Key)
	}
	return n
}
