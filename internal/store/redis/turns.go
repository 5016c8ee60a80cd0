package redis

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// convField is the stream entry field that names the conversation of a
// turn queued with EnqueueTurn.
const convField = "c"

// queuedKey is the hash, next to the stream, of the conversations with
// turns in it: conversation → how many of its entries the stream holds.
func (q *Queue) queuedKey() string { return q.stream + ":queued" }

// EnqueueTurn appends payload, a turn of conversation conv, and counts it
// in the stream's per-conversation counts, in one MULTI (or script): the
// count, the entry and its payload key exist together or not at all. Ack uncounts
// the entry in the script that deletes it, so a conversation is counted
// exactly while the stream holds its turns, however many gateways share
// the queue, and a worker that dies between storing a turn and
// acknowledging it leaves it counted only until its redelivery is
// acknowledged.
func (q *Queue) EnqueueTurn(ctx context.Context, conv string, payload []byte) error {
	if err := q.enqueue(ctx, &conv, [][]byte{payload}); err != nil {
		return fmt.Errorf("redis: enqueue turn: %w", err)
	}
	return nil
}

// queuedScript reads the counts of the conversations in ARGV. KEYS:
// stream, counts. Counts found while the stream is empty are stale (left
// by an entry acknowledged by a version that did not uncount it, or
// trimmed by an older build's MaxLen): they are deleted, and nothing is queued.
var queuedScript = redis.NewScript(`
local n = redis.call('HMGET', KEYS[2], unpack(ARGV))
for i = 1, #n do
  if n[i] then
    if redis.call('XLEN', KEYS[1]) == 0 then
      redis.call('DEL', KEYS[2])
      return {}
    end
    return n
  end
end
return {}
`)

// Queued reports, for each of convs, whether the stream holds turns of it
// (queued with EnqueueTurn), in one round trip.
func (q *Queue) Queued(ctx context.Context, convs ...string) ([]bool, error) {
	out := make([]bool, len(convs))
	if len(convs) == 0 {
		return out, nil
	}
	args := make([]any, len(convs))
	for i, c := range convs {
		args[i] = c
	}
	vals, err := queuedScript.Run(ctx, q.rdb, []string{q.stream, q.queuedKey()}, args...).Slice()
	if err != nil {
		return nil, fmt.Errorf("redis: queued: %w", unavailable(err))
	}
	for i, v := range vals {
		if i < len(out) && v != nil {
			out[i] = true // the script keeps no field at 0 or below
		}
	}
	return out, nil
}

// ackScript acknowledges and deletes entries, with their payload keys,
// uncounting the conversation of each one still in the stream (an entry
// acknowledged twice is uncounted once), and returns how many it deleted.
// KEYS: stream, counts. ARGV: group, ids. When the stream is left empty,
// whatever counts remain are stale and deleted.
var ackScript = redis.NewScript(forgetLua + `
local deleted = 0
for i = 2, #ARGV do
  local e = redis.call('XRANGE', KEYS[1], ARGV[i], ARGV[i])
  if e[1] then
    forget(KEYS[1], KEYS[2], e[1][2])
  end
  redis.call('XACK', KEYS[1], ARGV[1], ARGV[i])
  deleted = deleted + redis.call('XDEL', KEYS[1], ARGV[i])
end
if redis.call('XLEN', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2])
end
return deleted
`)
