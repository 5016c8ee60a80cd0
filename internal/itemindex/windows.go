package itemindex

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
)

// WindowKey names the turns within Radius of one message.
type WindowKey struct {
	Ref    memory.MessageRef
	Radius int
}

// windowSize is roughly what one cached window holds in memory, in bytes.
func windowSize(k cache.Key[WindowKey], w []memory.Message) int {
	return 96 + len(k.Of.Ref.Conversation) + len(k.Of.Ref.Key) + cache.Sum(w, func(m memory.Message) int {
		return 200 + len(m.Conversation) + len(m.Key) + len(m.Role) + len(m.Content)
	})
}

// Around returns the live messages within radius turns of each message
// refs names (the message itself included, when live), of the user's
// conversations, each once, ordered by conversation and Seq. Unknown refs,
// and other users', add nothing; radius < 0 finds nothing. The messages
// are the cache's own (not copied), never to be written into.
func (x *Index) Around(ctx context.Context, rev memory.Revisions, tenant, user string, refs []memory.MessageRef, radius int) ([]*memory.Message, error) {
	if len(refs) == 0 || radius < 0 {
		return []*memory.Message{}, nil
	}
	epoch := x.windows.Epoch() // see Items
	wins := make([][]memory.Message, 0, len(refs))
	var unread []memory.MessageRef
	asked := make(map[memory.MessageRef]bool, len(refs))
	for _, r := range refs {
		if asked[r] {
			continue
		}
		asked[r] = true
		if win, ok := x.windows.Get(cache.Key[WindowKey]{Tenant: tenant, User: user, Rev: rev.Messages, Of: WindowKey{Ref: r, Radius: radius}}); ok {
			wins = append(wins, win)
		} else {
			unread = append(unread, r)
		}
	}
	if len(unread) > 0 {
		read, closed, err := x.src.ReadWindows(ctx, tenant, user, unread, radius)
		if err != nil {
			return nil, fmt.Errorf("messages around: %w", err)
		}
		for k, win := range read {
			wins = append(wins, win)
			if closed[k] {
				x.windows.PutSince(epoch, cache.Key[WindowKey]{Tenant: tenant, User: user, Rev: rev.Messages, Of: k}, win)
			}
		}
	}
	return mergeWindows(wins), nil
}

// mergeWindows returns the windows' turns (overlapping, maybe repeated)
// ordered by conversation and seq, each once.
func mergeWindows(wins [][]memory.Message) []*memory.Message {
	n := 0
	for _, win := range wins {
		n += len(win)
	}
	order := make([]*memory.Message, 0, n)
	for _, win := range wins {
		for i := range win {
			order = append(order, &win[i])
		}
	}
	slices.SortFunc(order, func(a, b *memory.Message) int {
		return cmp.Or(cmp.Compare(a.Conversation, b.Conversation), cmp.Compare(a.Seq, b.Seq))
	})
	return slices.CompactFunc(order, func(a, b *memory.Message) bool {
		return a.Seq == b.Seq && a.Conversation == b.Conversation
	})
}
