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
// not, and returns how many it deleted: an erasure purges the erased
// user's entries (record.Queue). It reads the stream from its oldest
// entry to the newest there was when it began, a page (XRANGE … COUNT) at
// a time, and matches in this process, so no command holds Redis for
// longer than a page. Each page's matches go to one script, the one Ack
// runs, which acknowledges and deletes them and uncounts their
// conversations atomically: the per-conversation counts stay exactly what
// the stream holds (a purged turn leaves no conversation queued behind
// it), an entry a worker has claimed leaves the group's pending list, so
// it is never delivered again, and that worker's own Ack of it is a no-op.
//
// XDEL removes an entry from every read, but Redis frees its bytes with
// the stream node that holds it (up to stream-node-max-entries, 100 by
// default, or stream-node-max-bytes) once every entry of that node is
// deleted; until then they stay in Redis's memory and in the RDB
// snapshots it writes, and an append-only file keeps the XADD until it is
// rewritten.
func (q *Queue) Purge(ctx context.Context, match func(payload []byte) bool) (int, error) {
	newest, err := q.rdb.XRevRangeN(ctx, q.stream, "+", "-", 1).Result()
	if err != nil {
		return 0, fmt.Errorf("redis: purge: %w", unavailable(err))
	}
	if len(newest) == 0 {
		return 0, nil
	}
	end, n := newest[0].ID, 0
	for start := "-"; ; {
		page, err := q.rdb.XRangeN(ctx, q.stream, start, end, purgePage).Result()
		if err != nil {
			return n, fmt.Errorf("redis: purge: %w", unavailable(err))
		}
		args := []any{q.group}
		for _, m := range page {
			if match(delivery(m).Payload) {
				args = append(args, m.ID)
			}
		}
		if len(args) > 1 {
			deleted, err := ackScript.Run(ctx, q.rdb, []string{q.stream, q.queuedKey()}, args...).Int()
			if err != nil {
				return n, fmt.Errorf("redis: purge: %w", unavailable(err))
			}
			n += deleted
		}
		if len(page) < purgePage || page[len(page)-1].ID == end {
			return n, nil
		}
		start = "(" + page[len(page)-1].ID
	}
}
