package recall

import (
	"context"
	"fmt"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// IndexBacklog is the store's index backlog: the messages a round of
// indexing indexed in part (memory.PendingIndex), whose other chunks later
// rounds index. It is stored, so a gateway restarted between the rounds
// indexes them all the same, and an entry goes with its message.
type IndexBacklog interface {
	// DeferIndex records each entry (its conversation, Key, Chunk and
	// Bytes) whose message is live in its conversation, raising the Chunk
	// of one recorded already (never lowering it), and records nothing
	// of a user erased since the entry's GuardSince.
	DeferIndex(ctx context.Context, entries []memory.PendingIndex) error
	// PendingIndex returns the oldest entries recorded, in the order they
	// were, with their messages as stored now: at most limit, and past the
	// first only while their messages' texts (their Bytes) add up to at
	// most maxBytes.
	PendingIndex(ctx context.Context, limit, maxBytes int) ([]memory.PendingIndex, error)
	// ResolveIndex records how far entries (by ID) are indexed: one Done
	// is removed; another's Chunk is raised to its own (never lowered). An
	// entry no longer stored is skipped.
	ResolveIndex(ctx context.Context, entries []memory.PendingIndex) error
}

// backlogIndexUnits bounds the full-text indexing of one round of the
// index backlog (IndexBacklog), in index units (see exchangeIndexUnits):
// a quarter of an exchange's, so that a round is idle work of about a
// second at most (0.5–1.3 CPU-seconds of PostgreSQL, 0.1–0.25 of SQLite,
// this process's included: BenchmarkIndexBacklog, cmd/gateway, on a
// loaded 2-core machine) and an exchange queued meanwhile waits little
// behind it.
const backlogIndexUnits = exchangeIndexUnits / 4

// backlogEntries and backlogReadBytes bound what one round of the backlog
// reads: entries, and the text of their messages past the first (up to
// the 2 MiB a request body holds). A round cuts each message on from
// where the last left it (memory.PendingIndex.Offset), only as far as it
// indexes (resumedCut), never from its start again.
const (
	backlogEntries   = 256
	backlogReadBytes = 1 << 20
)

// IndexBacklog runs one round of the index backlog: it reads its oldest
// entries (IndexBacklog.PendingIndex) and indexes their messages' next
// chunks, the first entry's first, within backlogIndexUnits, stored
// without vectors (Backfill embeds those the message's bound on vectors
// lets be embedded, as it does the rest of an exchange's); then it
// records how far each is indexed. It returns how many entries it took
// further (0: none wait).
//
// Each write is guarded from the round's start: an erased user's, a
// deleted conversation's or a superseded message's chunks are never
// written, even when the erasure or the deletion commits while the round
// runs (the store checks in the write's transaction); their entries went
// with their messages, and the entry of a message read no longer live is
// removed. A round cut short (a restart) is run again: items are
// upserted.
func (ix *Indexer) IndexBacklog(ctx context.Context) (int, error) {
	guard, deferEpoch := time.Now(), ix.deferred.epoch()
	pending, err := ix.store.PendingIndex(ctx, backlogEntries, backlogReadBytes)
	if err != nil {
		return 0, fmt.Errorf("index backlog: %w", err)
	}
	if len(pending) == 0 {
		return 0, nil
	}
	// The budget is spent from the last message of msgs: the first entry
	// goes last.
	msgs := make([]cutMessage, 0, len(pending))
	of := make([]int, 0, len(pending)) // the entry of each of msgs
	for i := len(pending) - 1; i >= 0; i-- {
		p := &pending[i]
		if p.Gone {
			p.Done = true
			continue
		}
		// Cut from where the last round left the message, as it is
		// indexed: a round cuts about what it indexes.
		rest := ix.Window.resume(indexableText(p.Message), p.Chunk, p.Offset)
		if rest.done() {
			p.Done = true
			continue
		}
		msgs = append(msgs, cutMessage{id: p.Identity, key: p.Key, at: p.Message.CreatedAt, from: p.Chunk, rest: rest})
		of = append(of, i)
	}
	withinIndexBudget(msgs, ix.backlogUnits(), messageIndexFloor)
	_, items, later := ix.messageItems(msgs)
	for _, its := range [][]memory.Item{items, later} {
		for i := range its {
			its[i].GuardSince = guard
		}
	}
	if err := ix.addTextOnly(ctx, items); err != nil {
		return 0, fmt.Errorf("index backlog: %w", err)
	}
	// moved are the entries the round took further.
	moved := make([]memory.PendingIndex, 0, len(pending))
	for _, p := range pending {
		if p.Done {
			moved = append(moved, p)
		}
	}
	for j, m := range msgs {
		ix.backlogCut.Add(int64(len(m.rest.ends)))
		if len(m.chunks) > 0 {
			p := pending[of[j]]
			p.Chunk += len(m.chunks)
			p.Offset = m.rest.after(len(m.chunks))
			p.Done = len(m.chunks) == len(m.rest.ends) && m.rest.done()
			moved = append(moved, p)
		}
	}
	if err := ix.store.ResolveIndex(ctx, moved); err != nil {
		return 0, fmt.Errorf("index backlog: %w", err)
	}
	if n := ix.deferred.push(deferEpoch, later); n > 0 {
		ix.logger.Warn("items left without a vector until gateway reindex", "items", n)
	}
	ix.logger.Debug("indexed the backlog", "entries", len(moved), "items", len(items))
	return len(moved), nil
}

// DrainBacklog runs rounds of the index backlog (IndexBacklog) until none
// wait, or ctx ends, and returns how many rounds it ran: what `gateway
// reindex` does before it embeds, so every stored message is indexed,
// each round within its bound.
func (ix *Indexer) DrainBacklog(ctx context.Context) (int, error) {
	for rounds := 0; ; rounds++ {
		if err := ctx.Err(); err != nil {
			return rounds, err
		}
		if n, err := ix.IndexBacklog(ctx); err != nil || n == 0 {
			return rounds, err
		}
	}
}
