package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/memgate/memgate/internal/memory"
)

// claimScript claims up to max entries from the two streams a Queue
// reads — the legacy stream of older builds, then its own — for a
// consumer, and returns them with their payloads, in one step:
//
//   - first the entries pending, unacknowledged, for at least min idle
//     ms (XPENDING IDLE, then XCLAIM): a crashed worker's batch is redone;
//   - then entries never delivered to the group (XREADGROUP >), topping
//     the batch up.
//
// Each part takes the oldest entries of the two streams by id (the ids
// of both are times on Redis's clock), peeking at both before claiming
// from either, so that no more than max are claimed and a conversation's
// turns come out in the order they were queued, whichever stream holds
// them. An entry whose payload key is gone (purged after it was read, or
// lost) is acknowledged and deleted, uncounted, and not returned. The
// group is created on a stream that lacks it (Redis restarted without
// persistence; an older build created the stream under another group);
// a legacy stream that does not exist is left alone.
//
// KEYS: legacy stream, legacy counts, stream, counts. ARGV: group,
// consumer, min idle ms, max. It returns the last-delivered ids of the
// group on both streams (for a blocking wait), then, per entry: stream
// (1 legacy, 2 own), id, payload, delivery count.
var claimScript = redis.NewScript(forgetLua + `
local group, consumer, minIdle, max = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local streams = {KEYS[1], KEYS[3]}
local counts = {KEYS[2], KEYS[4]}
local function key(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local function before(a, b)
  local am, as = key(a)
  local bm, bs = key(b)
  return am < bm or (am == bm and as < bs)
end
-- first n of two id-ordered lists of {id, ...}: {stream, item} pairs
local function merge(lists, n)
  local out, i, j = {}, 1, 1
  while #out < n do
    local a, b = lists[1][i], lists[2][j]
    if a and (not b or not before(b[1], a[1])) then
      out[#out + 1] = {1, a}; i = i + 1
    elseif b then
      out[#out + 1] = {2, b}; j = j + 1
    else
      break
    end
  end
  return out
end
local last, live = {}, {false, false}
for s = 1, 2 do
  local info = redis.pcall('XINFO', 'GROUPS', streams[s])
  if type(info) == 'table' and not info.err then
    live[s] = true
    for _, g in ipairs(info) do
      local name, id
      for f = 1, #g - 1, 2 do
        if g[f] == 'name' then name = g[f + 1] elseif g[f] == 'last-delivered-id' then id = g[f + 1] end
      end
      if name == group then last[s] = id end
    end
  end
  if not last[s] then
    if live[s] or s == 2 then
      redis.call('XGROUP', 'CREATE', streams[s], group, '0', 'MKSTREAM')
      live[s] = true
    end
    last[s] = '0-0'
  end
end
local reply = {last[1], last[2]}
local picked = 0
local function deliver(s, entry, attempts)
  local f = entry[2]
  local payload, lost = '', false
  for j = 1, #f - 1, 2 do
    if f[j] == '` + payloadField + `' then
      payload = f[j + 1]
    elseif f[j] == '` + refField + `' then
      local v = redis.call('GET', streams[s] .. ':p:' .. f[j + 1])
      if v then payload = v else lost = true end
    end
  end
  if lost then
    forget(streams[s], counts[s], f)
    redis.call('XACK', streams[s], group, entry[1])
    redis.call('XDEL', streams[s], entry[1])
    return
  end
  picked = picked + 1
  reply[#reply + 1] = s
  reply[#reply + 1] = entry[1]
  reply[#reply + 1] = payload
  reply[#reply + 1] = attempts
end
local pend = {{}, {}}
for s = 1, 2 do
  if live[s] then
    pend[s] = redis.call('XPENDING', streams[s], group, 'IDLE', minIdle, '-', '+', max)
  end
end
for _, p in ipairs(merge(pend, max)) do
  local s, e = p[1], p[2]
  local got = redis.call('XCLAIM', streams[s], group, consumer, minIdle, e[1])
  if got[1] then
    deliver(s, got[1], e[4] + 1)
  else
    redis.call('XACK', streams[s], group, e[1]) -- trimmed: nothing to redo
  end
end
local n = max - picked
if n > 0 then
  local peek = {{}, {}}
  for s = 1, 2 do
    if live[s] then
      peek[s] = redis.call('XRANGE', streams[s], '(' .. last[s], '+', 'COUNT', n)
    end
  end
  local order = merge(peek, n)
  local k = {0, 0}
  for _, p in ipairs(order) do k[p[1]] = k[p[1]] + 1 end
  local read = {{}, {}}
  for s = 1, 2 do
    if k[s] > 0 then
      for _, e in ipairs(redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', k[s], 'STREAMS', streams[s], '>')[1][2]) do
        read[s][e[1]] = e
      end
    end
  end
  for _, p in ipairs(order) do
    local e = read[p[1]][p[2][1]]
    if e then deliver(p[1], e, 1) end
  end
end
return reply
`)

// legacyTag marks the delivery ids of entries of the legacy stream.
const legacyTag = "legacy:"

// Claim returns up to max deliveries for consumer, from both streams
// (see Queue): first the entries pending, unacknowledged, for at least
// staleAfter (0: all of them; a crashed worker's batch is redone), then
// new entries, oldest first across the two streams, in one round trip
// (claimScript). When there are none it waits up to block for an entry
// to arrive (XREAD BLOCK on both streams, which claims nothing) and
// claims again. Attempts is the entry's delivery count in the group,
// this delivery included. An entry whose payload key is gone (Purge
// deleted it after the entry was read, or it was lost) is dropped:
// acknowledged and deleted, not delivered.
func (q *Queue) Claim(ctx context.Context, consumer string, max int, staleAfter, block time.Duration) ([]memory.Delivery, error) {
	if max <= 0 {
		return nil, nil
	}
	ds, last, err := q.claim(ctx, consumer, max, staleAfter)
	if err != nil || len(ds) > 0 || block <= 0 {
		return ds, err
	}
	err = q.rdb.XRead(ctx, &redis.XReadArgs{
		Streams: []string{q.legacy, q.stream, last[0], last[1]}, Count: 1, Block: max1ms(block),
	}).Err()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("redis: claim: wait: %w", unavailable(err))
	}
	ds, _, err = q.claim(ctx, consumer, max, staleAfter)
	return ds, err
}

// claim runs claimScript, returning the deliveries and the group's
// last-delivered ids on the legacy stream and its own.
func (q *Queue) claim(ctx context.Context, consumer string, limit int, staleAfter time.Duration) ([]memory.Delivery, [2]string, error) {
	var last [2]string
	keys := []string{q.legacy, q.legacyQueuedKey(), q.stream, q.queuedKey()}
	minIdle := max(staleAfter, 0).Milliseconds()
	vals, err := claimScript.Run(ctx, q.rdb, keys, q.group, consumer, minIdle, limit).Slice()
	if err != nil {
		return nil, last, fmt.Errorf("redis: claim: %w", unavailable(err))
	}
	if len(vals) < 2 || (len(vals)-2)%4 != 0 {
		return nil, last, fmt.Errorf("redis: claim: reply of %d values", len(vals))
	}
	last[0], _ = vals[0].(string)
	last[1], _ = vals[1].(string)
	out := make([]memory.Delivery, 0, (len(vals)-2)/4)
	for i := 2; i+3 < len(vals); i += 4 {
		s, _ := vals[i].(int64)
		id, _ := vals[i+1].(string)
		payload, _ := vals[i+2].(string)
		attempts, _ := vals[i+3].(int64)
		if s == 1 {
			id = legacyTag + id
		}
		out = append(out, memory.Delivery{ID: id, Payload: []byte(payload), Attempts: int(attempts)})
	}
	return out, last, nil
}
