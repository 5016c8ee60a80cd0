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

// legacyQueuedKey is the counts of the legacy stream, where older builds
// count the turns they queue.
func (q *Queue) legacyQueuedKey() string { return q.legacy + ":queued" }

// EnqueueTurn appends payload, a turn of conversation conv, and counts it
// in the stream's per-conversation counts, in one MULTI (or script): the
// count, the entry and its payload key exist together or not at all. Ack uncounts
// the entry in the script that deletes it, so a conversation is counted
// exactly while the stream holds its turns, however many gateways share
// the queue, and a worker that dies between storing a turn and
// acknowledging it leaves it counted only until its redelivery is
// acknowledged. It is skipped while the breaker is open.
func (q *Queue) EnqueueTurn(ctx context.Context, conv string, payload []byte) error {
	if err := q.breaker.doSending(ctx, "enqueue_turn", len(payload), func(ctx context.Context) error { return q.enqueue(ctx, &conv, [][]byte{payload}) }); err != nil {
		return fmt.Errorf("redis: enqueue turn: %w", err)
	}
	return nil
}

// queuedScript reads the counts of the conversations in ARGV in both
// streams' counts and returns, for each, 1 if either counts it, else 0.
// KEYS: legacy stream, its counts, stream, its counts. Counts found while
// their stream is empty are stale (left by an entry acknowledged by a
// version that did not uncount it, or trimmed by an older build's MaxLen):
// they are deleted, and count nothing.
var queuedScript = redis.NewScript(`
local out = {}
for i = 1, #ARGV do out[i] = 0 end
for s = 1, 3, 2 do
  local n = redis.call('HMGET', KEYS[s + 1], unpack(ARGV))
  for i = 1, #n do
    if n[i] then
      if redis.call('XLEN', KEYS[s]) == 0 then
        redis.call('DEL', KEYS[s + 1])
        break
      end
      out[i] = 1
    end
  end
end
return out
`)

// Queued reports, for each of convs, whether either stream holds turns of
// it (queued with EnqueueTurn by this build or an older one), in one round
// trip. It is skipped while the breaker is open (ErrBreakerOpen): the
// caller treats that as any check Redis did not answer.
func (q *Queue) Queued(ctx context.Context, convs ...string) ([]bool, error) {
	out := make([]bool, len(convs))
	if len(convs) == 0 {
		return out, nil
	}
	args := make([]any, len(convs))
	for i, c := range convs {
		args[i] = c
	}
	keys := []string{q.legacy, q.legacyQueuedKey(), q.stream, q.queuedKey()}
	var vals []int64
	err := q.breaker.do(ctx, "queued_check", func(ctx context.Context) (err error) {
		vals, err = queuedScript.Run(ctx, q.rdb, keys, args...).Int64Slice()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("redis: queued: %w", unavailable(err))
	}
	for i, v := range vals {
		if i < len(out) {
			out[i] = v == 1
		}
	}
	return out, nil
}

// ackScript acknowledges and deletes entries of both streams, with their
// payload keys, uncounting the conversation of each one still in its
// stream (an entry acknowledged twice is uncounted once), and returns how
// many it deleted. KEYS: legacy stream, its counts, stream, its counts.
// ARGV: group, how many ids of the legacy stream follow, those ids, then
// the stream's. When a stream is left empty, whatever counts of it remain
// are stale and deleted.
var ackScript = redis.NewScript(forgetLua + `
local deleted = 0
local function ack(stream, counts, from, to)
  if from > to then return end
  for i = from, to do
    local e = redis.call('XRANGE', stream, ARGV[i], ARGV[i])
    if e[1] then
      forget(stream, counts, e[1][2])
    end
    redis.call('XACK', stream, ARGV[1], ARGV[i])
    deleted = deleted + redis.call('XDEL', stream, ARGV[i])
  end
  if redis.call('XLEN', stream) == 0 then
    redis.call('DEL', counts)
  end
end
local n = tonumber(ARGV[2])
ack(KEYS[1], KEYS[2], 3, 2 + n)
ack(KEYS[3], KEYS[4], 3 + n, #ARGV)
return deleted
`)

// ack runs ackScript on ids of the legacy stream and of the stream, in
// one round trip, and returns how many entries it deleted.
func (q *Queue) ack(ctx context.Context, legacy, own []string) (int, error) {
	args := make([]any, 0, 2+len(legacy)+len(own))
	args = append(args, q.group, len(legacy))
	for _, id := range legacy {
		args = append(args, id)
	}
	for _, id := range own {
		args = append(args, id)
	}
	keys := []string{q.legacy, q.legacyQueuedKey(), q.stream, q.queuedKey()}
	n, err := ackScript.Run(ctx, q.rdb, keys, args...).Int()
	return n, unavailable(err)
}
