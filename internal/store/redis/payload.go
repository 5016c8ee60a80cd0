package redis

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// A stream entry holds no payload. Its payload — a captured exchange, with
// the user's words — is a string key of its own next to the stream, which
// the entry names by a reference (refField); the entry is written with
// its payload key atomically (a MULTI, or a script that trims too), and
// deleted with it in one script (Ack, Purge, trimming). The reason is erasure: XDEL only flags an entry
// deleted, and Redis frees its bytes with the stream node that holds it
// (up to 100 entries) once every entry of that node is deleted, so a
// payload kept in the stream would stay in Redis's memory and in its
// snapshots after an erased user's entries were purged. DEL frees a
// payload key's value at once.
//
// An entry an older build queued carries its payload inline
// (payloadField); it is read, acknowledged and purged as before.

// refField is the stream entry field that holds the reference of the
// entry's payload key (payloadKey).
const refField = "r"

// payloadKey is the key of the payload whose reference is ref:
// "<stream>:p:<ref>", next to the stream and its counts.
func (q *Queue) payloadKey(ref string) string { return q.stream + ":p:" + ref }

// forgetLua is the Lua function the scripts that remove entries share:
// forget(stream, counts, fields) deletes the payload key of the entry
// whose fields are given and uncounts its conversation, if it has them.
const forgetLua = `
local function forget(stream, counts, f)
  for j = 1, #f - 1, 2 do
    if f[j] == '` + convField + `' then
      if redis.call('HINCRBY', counts, f[j + 1], -1) <= 0 then
        redis.call('HDEL', counts, f[j + 1])
      end
    elseif f[j] == '` + refField + `' then
      redis.call('DEL', stream .. ':p:' .. f[j + 1])
    end
  end
end
`

// enqueueScript appends entries to the stream, each with its payload key
// (and, given a conversation, counted in the counts), then trims the
// stream to MaxLen (exactly, not with XADD's MAXLEN ~, which would leave
// the payload keys of what it trims behind), deleting the payload keys of what it trims and
// uncounting it. KEYS: stream, counts, then the payload key of each
// entry. ARGV: max length (0: no cap), "1" when the entries are turns of
// a conversation (else "0"), the conversation, then each entry's
// reference and payload.
var enqueueScript = redis.NewScript(forgetLua + `
local conv = ARGV[3]
for i = 3, #KEYS do
  redis.call('SET', KEYS[i], ARGV[2 * i - 1])
  if ARGV[2] == '1' then
    redis.call('XADD', KEYS[1], '*', '` + refField + `', ARGV[2 * i - 2], '` + convField + `', conv)
    redis.call('HINCRBY', KEYS[2], conv, 1)
  else
    redis.call('XADD', KEYS[1], '*', '` + refField + `', ARGV[2 * i - 2])
  end
end
local max = tonumber(ARGV[1])
if max > 0 then
  local excess = redis.call('XLEN', KEYS[1]) - max
  if excess > 0 then
    for _, e in ipairs(redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', excess)) do
      forget(KEYS[1], KEYS[2], e[2])
    end
    redis.call('XTRIM', KEYS[1], 'MAXLEN', max)
  end
end
return 0
`)

// enqueue appends payloads in order, each a turn of *conv unless conv is
// nil, in one round trip that Redis runs as a whole: every entry exists
// with its payload key and its count, or none does. Without MaxLen that
// is a MULTI; with it, enqueueScript, which trims too. (A MULTI costs
// Redis a fraction of what a script does: for a 4 KiB turn about 8µs of
// commands against about 70µs for the script.)
func (q *Queue) enqueue(ctx context.Context, conv *string, payloads [][]byte) error {
	if len(payloads) == 0 {
		return nil
	}
	refs := make([]string, len(payloads))
	for i := range refs {
		refs[i] = rand.Text() // 128 random bits: no two payloads share a key
	}
	if q.maxLen > 0 {
		return q.enqueueTrimmed(ctx, conv, refs, payloads)
	}
	_, err := q.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i, payload := range payloads {
			p.Set(ctx, q.payloadKey(refs[i]), payload, 0)
			values := []any{refField, refs[i]}
			if conv != nil {
				values = append(values, convField, *conv)
			}
			p.XAdd(ctx, &redis.XAddArgs{Stream: q.stream, Values: values})
			if conv != nil {
				p.HIncrBy(ctx, q.queuedKey(), *conv, 1)
			}
		}
		return nil
	})
	return unavailable(err)
}

// enqueueTrimmed is enqueue through enqueueScript, for a queue with a
// MaxLen.
func (q *Queue) enqueueTrimmed(ctx context.Context, conv *string, refs []string, payloads [][]byte) error {
	keys := make([]string, 0, 2+len(payloads))
	keys = append(keys, q.stream, q.queuedKey())
	args := make([]any, 0, 3+2*len(payloads))
	if conv != nil {
		args = append(args, q.maxLen, "1", *conv)
	} else {
		args = append(args, q.maxLen, "0", "")
	}
	for i, p := range payloads {
		keys = append(keys, q.payloadKey(refs[i]))
		args = append(args, refs[i], p)
	}
	return unavailable(enqueueScript.Run(ctx, q.rdb, keys, args...).Err())
}

// resolvedEntry is a stream entry with its payload; lost reports that
// the entry names a payload key that no longer exists.
type resolvedEntry struct {
	msg     redis.XMessage
	payload []byte
	lost    bool
}

// readPayloads reads the payloads of msgs, entries of stream, in one
// MGET (none when no entry has a payload key): the inline payload of an
// entry an older build queued, or the value of its payload key.
func (q *Queue) readPayloads(ctx context.Context, stream string, msgs []redis.XMessage) ([]resolvedEntry, error) {
	out := make([]resolvedEntry, len(msgs))
	var keys []string
	var at []int
	for i, m := range msgs {
		out[i].msg = m
		if p, ok := m.Values[payloadField].(string); ok {
			out[i].payload = []byte(p)
		}
		if ref, ok := m.Values[refField].(string); ok {
			keys, at = append(keys, stream+":p:"+ref), append(at, i)
		}
	}
	if len(keys) == 0 {
		return out, nil
	}
	vals, err := q.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("read payloads: %w", unavailable(err))
	}
	for j, i := range at {
		if s, ok := vals[j].(string); ok {
			out[i].payload = []byte(s)
		} else {
			out[i].lost = true
		}
	}
	return out, nil
}
