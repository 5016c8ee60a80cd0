package redis

import (
	"context"
	"fmt"
)

// purgePage is how many stream entries Purge reads at a time: payloads
// can be large (a capture holds the client's resent history), so a page
// is small.
const purgePage = 32

// Purge deletes the entries whose payload match reports true, claimed or
// not, with their payload keys, and returns how many it deleted: an
// erasure purges the erased user's entries (record.Queue). It covers
// both streams (see Queue): the legacy one, then the stream. It reads each
// stream from its oldest entry to the newest there was when it began, a
// page (XRANGE … COUNT, then one MGET of the page's payloads) at a time,
// and matches in this process, so no command holds Redis for longer than
// a page. Each page's matches go to one script, the one Ack runs, which
// acknowledges and deletes them, deletes their payload keys and uncounts
// their conversations atomically: the per-conversation counts stay
// exactly what the stream holds (a purged turn leaves no conversation
// queued behind it), an entry a worker has claimed leaves the group's
// pending list, so it is never delivered again, and that worker's own Ack
// of it is a no-op. An entry whose payload key is gone is passed over
// (Claim drops it).
//
// DEL frees a payload key's value at once, so the purged payloads leave
// Redis's memory and its next snapshot. (An append-only file keeps the
// writes until it is rewritten: the Capturer calls Scrub after a purge,
// see aof.go.) The stream's entries hold only
// references; the entries an older build queued hold their payload
// inline, and XDEL frees those bytes only with the stream node that holds
// them (up to stream-node-max-entries, 100 by default) once every entry
// of that node is deleted.
func (q *Queue) Purge(ctx context.Context, match func(payload []byte) bool) (int, error) {
	n := 0
	for _, legacy := range []bool{true, false} {
		got, err := q.purge(ctx, legacy, match)
		n += got
		if err != nil {
			return n, fmt.Errorf("redis: purge: %w", err)
		}
	}
	return n, nil
}

// purge is Purge on the legacy stream or on the stream.
func (q *Queue) purge(ctx context.Context, legacy bool, match func(payload []byte) bool) (int, error) {
	stream := q.stream
	if legacy {
		stream = q.legacy
	}
	newest, err := q.rdb.XRevRangeN(ctx, stream, "+", "-", 1).Result()
	if err != nil {
		return 0, unavailable(err)
	}
	if len(newest) == 0 {
		return 0, nil
	}
	end, n := newest[0].ID, 0
	for start := "-"; ; {
		page, err := q.rdb.XRangeN(ctx, stream, start, end, purgePage).Result()
		if err != nil {
			return n, unavailable(err)
		}
		entries, err := q.readPayloads(ctx, stream, page)
		if err != nil {
			return n, err
		}
		var ids []string
		for _, e := range entries {
			if !e.lost && match(e.payload) {
				ids = append(ids, e.msg.ID)
			}
		}
		if len(ids) > 0 {
			var deleted int
			if legacy {
				deleted, err = q.ack(ctx, ids, nil)
			} else {
				deleted, err = q.ack(ctx, nil, ids)
			}
			if err != nil {
				return n, err
			}
			n += deleted
		}
		if len(page) < purgePage || page[len(page)-1].ID == end {
			return n, nil
		}
		start = "(" + page[len(page)-1].ID
	}
}
