package itemindex

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/memgate/memgate/internal/memory"
)

// WindowKey names the turns within Radius of one message.
type WindowKey struct {
	Ref    memory.MessageRef
	Radius int
}

// WindowSource is what Windows reads from its store.
type WindowSource interface {
	// RevisionReader reads the user's Revisions, whose Messages every
	// update and delete of one of their messages, by any process, moves.
	// Inserts need not move it: a new message takes a seq above every
	// stored one of its conversation, so it cannot join a closed window.
	RevisionReader
	// ReadWindows reads, for each of refs that names a stored message of
	// the user, the live turns within radius of it (superseded messages and
	// replies the upstream broke off left out, Raw empty), ordered by Seq
	// — nil when none is live — and whether the window is closed: its last
	// seq is stored, live or not. Refs naming no stored message are absent.
	ReadWindows(ctx context.Context, tenant, user string, refs []memory.MessageRef, radius int) (read map[WindowKey][]memory.Message, closed map[WindowKey]bool, err error)
}

// Windows keeps the turns around recalled messages in memory, per user, as
// of the user's Revisions.Messages count, and reads them again from its
// WindowSource when the count has moved: a warm conversation's recall
// finds mostly the same turns request after request. Only closed windows
// are kept (no new message can join them). It is safe for concurrent use.
type Windows struct {
	src   WindowSource
	cache *CountedCache[WindowKey, []memory.Message]
}

// DefaultWindowBytes bounds the turns a Windows keeps, over all users: 16
// MiB, about 30,000 turns of 300 bytes.
const DefaultWindowBytes = 16 << 20

// NewWindows returns a Windows reading src, bounded at max bytes (least
// recently recalled users evicted first).
func NewWindows(src WindowSource, max int) *Windows {
	return &Windows{src: src, cache: NewCountedCache(max, windowSize)}
}

// windowSize is roughly what one cached window holds in memory, in bytes.
func windowSize(k WindowKey, w []memory.Message) int {
	n := 96 + len(k.Ref.Conversation) + len(k.Ref.Key)
	for _, m := range w {
		n += 200 + len(m.Conversation) + len(m.Key) + len(m.Role) + len(m.Content)
	}
	return n
}

// Around returns the live messages within radius turns of each message
// refs names (the message itself included, when live), of the user's
// conversations, each message once, ordered by conversation and Seq, as
// WindowSource.ReadWindows reads them. Unknown refs, and refs of other
// users or tenants, add nothing; radius < 0 finds nothing. The messages
// are the cache's copies' values: their fields are shared strings only.
func (w *Windows) Around(ctx context.Context, tenant, user string, refs []memory.MessageRef, radius int) ([]memory.Message, error) {
	if len(refs) == 0 || radius < 0 {
		return []memory.Message{}, nil
	}
	// The count is read before the turns, so turns read after a change are
	// never kept as of a count from before it.
	rev, err := readRevisions(ctx, w.src, tenant, user)
	if err != nil {
		return nil, fmt.Errorf("messages around: read revision: %w", err)
	}
	changed := rev.Messages
	keys := make([]WindowKey, 0, len(refs))
	asked := make(map[WindowKey]bool, len(refs))
	for _, r := range refs {
		if k := (WindowKey{Ref: r, Radius: radius}); !asked[k] {
			asked[k] = true
			keys = append(keys, k)
		}
	}
	got, missing := w.cache.Get(tenant, user, changed, keys)
	if len(missing) > 0 {
		refs := make([]memory.MessageRef, len(missing))
		for i, k := range missing {
			refs[i] = k.Ref
		}
		read, closed, err := w.src.ReadWindows(ctx, tenant, user, refs, radius)
		if err != nil {
			return nil, fmt.Errorf("messages around: %w", err)
		}
		if got == nil {
			got = make(map[WindowKey][]memory.Message, len(read))
		}
		for k, win := range read {
			if asked[k] {
				got[k] = win
			}
		}
		w.cache.Put(tenant, user, changed, func(yield func(WindowKey, []memory.Message) bool) {
			for k, ok := range closed {
				if ok && asked[k] && !yield(k, read[k]) {
					return
				}
			}
		})
	}
	return mergeWindows(got), nil
}

// mergeWindows returns the windows' turns ordered by conversation and seq,
// each once: windows overlap where hits are near each other. They are
// ordered through small keys (sorting the messages themselves moved
// 150-byte structs).
func mergeWindows(got map[WindowKey][]memory.Message) []memory.Message {
	type at struct {
		conversation string
		seq          int64
		m            *memory.Message
	}
	n := 0
	for _, win := range got {
		n += len(win)
	}
	order := make([]at, 0, n)
	for _, win := range got {
		for i := range win {
			order = append(order, at{win[i].Conversation, win[i].Seq, &win[i]})
		}
	}
	slices.SortFunc(order, func(a, b at) int {
		return cmp.Or(cmp.Compare(a.conversation, b.conversation), cmp.Compare(a.seq, b.seq))
	})
	out := make([]memory.Message, 0, len(order))
	for i, a := range order {
		if i > 0 && a.seq == order[i-1].seq && a.conversation == order[i-1].conversation {
			continue
		}
		out = append(out, *a.m)
	}
	return out
}
