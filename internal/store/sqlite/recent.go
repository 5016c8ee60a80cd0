package sqlite

import (
	"context"
	"fmt"
	"slices"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/telemetry"
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
func tailSize(k revKey, t tail) int {
	n := 64 + len(k.Conv)
	for _, m := range t.msgs {
		// The identity's strings are shared by the conversation's messages.
		n += 160 + len(m.Key) + len(m.Role) + len(m.Content) + len(m.Raw)
	}
	return n
}

// Recent returns up to n newest live messages of the conversation, oldest
// first; none (and no error) for n <= 0 or an unknown conversation.
//
// The newest messages of a conversation are kept in memory as of the
// user's messages count (cache.Revisions.Tail: migration 0014's
// messages_added plus 0013's messages_changed), read once per request when ctx
// carries a memory.Memo (the read recall's searches share), and read
// again from the file when it has moved: by another Store's or process's
// write, an erasure, a retention delete, an edit in SQL. This Store's own
// saves that only append to a conversation append to what it holds
// (advanceTails). The returned slice is the caller's; its messages' Raw is
// shared with the cache and must not be written to.
func (s *Store) Recent(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error) {
	defer telemetry.Span(&ctx, "sqlite.Recent")()
	if n <= 0 {
		return []memory.Message{}, nil
	}
	// The count is read before the messages, so messages read after a
	// change are never kept as of a count from before it.
	rev, err := cache.ReadRevisions(ctx, indexSource{s}, id.Tenant, id.User)
	if err != nil {
		// Without the count nothing held can be trusted, nor kept.
		msgs, err := liveTail(ctx, s.reads, id, n)
		if err != nil {
			return nil, fmt.Errorf("recent messages: %w", err)
		}
		return msgs, nil
	}
	key := revKey{id.Tenant, id.User, rev.Tail(), id.Conversation}
	if t, ok := s.tails.Get(key); ok && (len(t.msgs) >= n || t.all) {
		return slices.Clone(t.msgs[max(0, len(t.msgs)-n):]), nil
	}
	limit := max(n, tailKeep)
	msgs, err := liveTail(ctx, s.reads, id, limit)
	if err != nil {
		return nil, fmt.Errorf("recent messages: %w", err)
	}
	s.tails.Put(key, tail{msgs: msgs, all: len(msgs) < limit})
	return slices.Clone(msgs[max(0, len(msgs)-n):]), nil
}

// advanceTails brings the tails held of the users that a committed write
// transaction stored exchanges of (exs, their results, and before[i] the
// user's Revisions.Tail read in the transaction just before exs[i]'s
// inserts) to the counts the transaction left, so that a conversation's
// next Recent is answered from memory. For a user whose exchanges
// superseded nothing and whose counts follow each other (each exchange's
// count is the one before plus what the one before inserted: nothing else
// changed their messages in between), a tail held at the count before
// their first exchange was the state just before the transaction, which
// did nothing to their messages but insert what the results report stored
// (nothing runs after the last inserts but the exchange's record and the
// conversation's count, which fire no trigger on messages); the stored
// messages appended to it are the tail at the count the transaction left,
// kept under that count. The count only grows, one writer at a time, so no
// other state has either count. Otherwise nothing is kept: the tails held,
// under older counts, are never looked up again. A tail already held at
// the new count (a Recent that read the file after the commit) is left as
// it is.
func (s *Store) advanceTails(exs []memory.Exchange, results []memory.SaveResult, before []int64) {
	for i, ex := range exs {
		if results[i].Inserted == 0 || slices.ContainsFunc(exs[:i], func(o memory.Exchange) bool {
			return o.Tenant == ex.Tenant && o.User == ex.User // the user was advanced with it
		}) {
			continue
		}
		mine := func(j int) bool {
			return results[j].Inserted > 0 && exs[j].Tenant == ex.Tenant && exs[j].User == ex.User
		}
		next := before[i]
		appended := true
		var convs []string
		for j := i; j < len(exs); j++ {
			if !mine(j) {
				continue
			}
			if results[j].Superseded > 0 || before[j] != next {
				appended = false
			}
			next = before[j] + int64(results[j].Inserted)
			if !slices.Contains(convs, exs[j].Conversation) {
				convs = append(convs, exs[j].Conversation)
			}
		}
		for _, conv := range convs {
			t, held := s.tails.Get(revKey{ex.Tenant, ex.User, before[i], conv})
			to := revKey{ex.Tenant, ex.User, next, conv}
			if !appended || !held {
				continue
			}
			if _, done := s.tails.Get(to); done {
				continue
			}
			s.tails.Put(to, appendStored(t, exs[i:], results[i:], conv, mine, i))
		}
	}
}

// appendStored returns t with the messages stored in conv by the exchanges
// of exs that mine (by index offset from) reports appended, the newest
// max(len(t.msgs), tailKeep) kept. Messages t holds already are not
// appended again.
func appendStored(t tail, exs []memory.Exchange, results []memory.SaveResult, conv string, mine func(int) bool, offset int) tail {
	limit := max(len(t.msgs), tailKeep)
	msgs := t.msgs
	for j := range exs {
		if !mine(j+offset) || exs[j].Conversation != conv {
			continue
		}
		for _, m := range results[j].Stored {
			if len(msgs) == 0 || m.Seq > msgs[len(msgs)-1].Seq {
				msgs = append(msgs, m)
			}
		}
	}
	all := t.all
	if len(msgs) > limit {
		msgs, all = msgs[len(msgs)-limit:], false
	}
	return tail{msgs: msgs, all: all}
}
