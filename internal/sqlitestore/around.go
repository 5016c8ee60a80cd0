package sqlitestore

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/memgate/memgate/internal/memory"
)

// aroundCacheBytes bounds the turns around recalled messages a Store keeps
// in memory, over all users (least recently recalled evicted first).
const aroundCacheBytes = 16 << 20

// windowKey names the turns within radius of one message.
type windowKey struct {
	ref    memory.MessageRef
	radius int
}

// windowSize is roughly what one cached window holds in memory, in bytes.
func windowSize(k windowKey, w []memory.Message) int {
	n := 96 + len(k.ref.Conversation) + len(k.ref.Key)
	for _, m := range w {
		n += 200 + len(m.Conversation) + len(m.Key) + len(m.Role) + len(m.Content)
	}
	return n
}

// MessagesAround returns the live messages within radius turns of each
// message refs names (the message itself included, when live), of the
// user's conversations, each message once, ordered by conversation and
// Seq. Raw is left empty. A reply the upstream broke off
// (memory.Message.Failed) is left out: it is never recalled, not even as a
// neighbour. Unknown refs, and refs of other users or tenants, add nothing;
// radius < 0 finds nothing.
//
// The windows of turns read are kept in memory as of the user's
// messages_changed count, which every update and delete of their messages
// moves (migration 0013), and read again when it has moved: a warm
// conversation's recall finds mostly the same turns request after request,
// and every commit of the capture path empties the readers' page caches.
// Only windows whose last turn was already stored are kept: a new message
// takes a seq above every stored one, so it cannot join them.
func (s *Store) MessagesAround(ctx context.Context, tenant, user string, refs []memory.MessageRef, radius int) ([]memory.Message, error) {
	if len(refs) == 0 || radius < 0 {
		return []memory.Message{}, nil
	}
	// The count is read before the turns, so turns read after a change are
	// never kept as of a count from before it.
	changed, err := s.messagesChanged(ctx, tenant, user)
	if err != nil {
		return nil, err
	}
	keys := make([]windowKey, 0, len(refs))
	asked := make(map[windowKey]bool, len(refs))
	for _, r := range refs {
		if k := (windowKey{ref: r, radius: radius}); !asked[k] {
			asked[k] = true
			keys = append(keys, k)
		}
	}
	got, missing := s.around.Get(tenant, user, changed, keys)
	if len(missing) > 0 {
		refs := make([]memory.MessageRef, len(missing))
		for i, k := range missing {
			refs[i] = k.ref
		}
		read, closed, err := s.readWindows(ctx, tenant, user, refs, radius)
		if err != nil {
			return nil, err
		}
		if got == nil {
			got = make(map[windowKey][]memory.Message, len(read))
		}
		for k, w := range read {
			got[k] = w
		}
		// Only closed windows are kept: a new message takes a seq above
		// every stored one, so it cannot join them.
		s.around.Put(tenant, user, changed, func(yield func(windowKey, []memory.Message) bool) {
			for k := range closed {
				if !yield(k, read[k]) {
					return
				}
			}
		})
	}
	// The windows overlap where hits are near each other: order their
	// turns by conversation and seq through small keys (sorting the
	// messages themselves moved 150-byte structs), then drop repeats.
	type at struct {
		conversation string
		seq          int64
		m            *memory.Message
	}
	n := 0
	for _, w := range got {
		n += len(w)
	}
	order := make([]at, 0, n)
	for _, w := range got {
		for i := range w {
			order = append(order, at{w[i].Conversation, w[i].Seq, &w[i]})
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
	return out, nil
}

// messagesChanged returns the user's messages_changed count (0 before any
// change).
func (s *Store) messagesChanged(ctx context.Context, tenant, user string) (int64, error) {
	var changed int64
	err := s.reads.QueryRowContext(ctx, `SELECT messages_changed FROM memory_item_revisions WHERE tenant = ? AND user_id = ?`,
		tenant, user).Scan(&changed)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("messages around: read revision: %w", err)
	}
	return changed, nil
}

// readWindows reads the live turns within radius of each of refs from the
// file: the windows of the refs that name a stored message, and which of
// them are closed (their last seq is stored, live or not, so no message
// can join them without an update, which moves messages_changed).
func (s *Store) readWindows(ctx context.Context, tenant, user string, refs []memory.MessageRef, radius int) (map[windowKey][]memory.Message, map[windowKey]bool, error) {
	pairs := make([][2]string, len(refs))
	for i, r := range refs {
		pairs[i] = [2]string{r.Conversation, r.Key}
	}
	list, err := json.Marshal(pairs)
	if err != nil {
		return nil, nil, fmt.Errorf("messages around: encode refs: %w", err)
	}
	// The superseded turns inside a window are read too (and then left
	// out), so a window whose last seq is a superseded turn counts as
	// closed.
	rows, err := s.reads.QueryContext(ctx, `SELECT r.key, h.seq, m.conversation, m.seq, m.key, m.role, m.content, m.tokens, m.created_at,
			m.superseded_at IS NOT NULL,
			CASE WHEN instr(m.raw, '"`+memory.FailedField+`"') > 0 THEN m.raw END
		FROM (SELECT DISTINCT json_extract(value, '$[0]') AS conversation, json_extract(value, '$[1]') AS key
		      FROM json_each(?)) r
		JOIN messages h ON h.tenant = ? AND h.user_id = ? AND h.conversation = r.conversation AND h.key = r.key
		JOIN messages m ON m.tenant = h.tenant AND m.user_id = h.user_id AND m.conversation = h.conversation
			AND m.seq BETWEEN h.seq - ? AND h.seq + ?`, string(list), tenant, user, radius, radius)
	if err != nil {
		return nil, nil, fmt.Errorf("messages around: %w", err)
	}
	defer rows.Close()
	read := make(map[windowKey][]memory.Message, len(refs))
	closed := make(map[windowKey]bool, len(refs))
	for rows.Next() {
		m := memory.Message{Tenant: tenant, User: user}
		var (
			hitKey     string
			hitSeq     int64
			created    int64
			superseded bool
			marked     sql.NullString
		)
		if err := rows.Scan(&hitKey, &hitSeq, &m.Conversation, &m.Seq, &m.Key, &m.Role, &m.Content, &m.Tokens, &created, &superseded, &marked); err != nil {
			return nil, nil, fmt.Errorf("messages around: %w", err)
		}
		k := windowKey{ref: memory.MessageRef{Conversation: m.Conversation, Key: hitKey}, radius: radius}
		if m.Seq == hitSeq+int64(radius) {
			closed[k] = true
		}
		if _, ok := read[k]; !ok {
			read[k] = nil // a stored message, even when nothing of it is live
		}
		if superseded || (marked.Valid && (memory.Message{Raw: []byte(marked.String)}).Failed()) {
			continue
		}
		m.CreatedAt = fromNanos(created)
		read[k] = append(read[k], m)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("messages around: %w", err)
	}
	return read, closed, nil
}
