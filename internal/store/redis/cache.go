package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/telemetry"
)

// Backend is what a Cache calls of the memory store it sits in front of:
// the reads it caches, and the writes and deletes after which it brings its
// windows up to date. Everything else of the store is the store's own, not
// the Cache's (see Cached).
type Backend interface {
	SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error)
	SaveExchanges(ctx context.Context, exs []memory.Exchange) ([]memory.SaveResult, error)
	Recent(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error)
	RecentMany(ctx context.Context, ids []memory.Identity, n int) ([][]memory.Message, error)
	DeleteConversation(ctx context.Context, id memory.Identity) error
	DeleteUser(ctx context.Context, tenant, user string) error
	ErasedAt(ctx context.Context, tenant, user string) (time.Time, error)
	Adopt(ctx context.Context, to memory.Identity, prior []memory.Message) (int, error)
	Footprint(ctx context.Context, tenant, user string) (memory.Footprint, error)
}

// CacheConfig tunes a Cache.
type CacheConfig struct {
	// Prefix is prepended to every key (e.g. "memgate:").
	Prefix string
	// Window is how many of a conversation's newest live messages are cached;
	// default 50. Recent calls asking for more go to the backend.
	Window int
	// TTL is how long an unused conversation stays cached; every read renews
	// it. Default 1h.
	TTL time.Duration
}

// tombstoneTTL is how long a deleted conversation refuses to be cached
// again, so a read that loaded it just before the delete cannot put it back.
const tombstoneTTL = 30 * time.Second

// tombstone is the version a deleted conversation's cache carries: larger
// than any real Seq, so no refill passes the version check.
const tombstone = "9223372036854775807"

// Cache keeps the recent window of each conversation in a capped Redis list
// in front of a Backend. It serves only what it caches, and the writes that
// must keep the windows current (Cached composes it with the store for the
// rest):
//
//   - Recent(n ≤ Window) reads the list, renewing its TTL; on a miss it reads
//     Window messages from the backend and fills the list.
//   - SaveExchange writes through to the backend, then appends the
//     messages it stored (memory.SaveResult.Stored) to the cached window
//     when the save only appended them right after the window's newest
//     message, or else reloads the window from the backend (so edits and
//     regenerations that supersede messages are reflected exactly), or
//     drops the cached window if the reload fails.
//   - DeleteConversation and DeleteUser delete from the backend, then drop
//     the cached windows (each user's cached conversations are tracked in a
//     set); DeleteUser also empties the embedding cache kept under the same
//     prefix (see EmbeddingCache).
//
// Every fill is versioned by the newest Seq it holds, so a slow reader can
// never overwrite a fresher window. When Redis fails, reads and writes go to
// the backend alone and a warning is logged (never message contents); the
// deletes, however, return an error wrapping memory.ErrUnavailable when the
// cache could not be cleared, because erased data must not stay served.
type Cache struct {
	rdb    redis.UniversalClient
	inner  Backend
	logger *slog.Logger
	prefix string
	window int
	ttl    time.Duration
}

// NewCache returns a Cache of inner on rdb.
func NewCache(rdb redis.UniversalClient, inner Backend, logger *slog.Logger, cfg CacheConfig) *Cache {
	if cfg.Window <= 0 {
		cfg.Window = 50
	}
	if cfg.TTL <= 0 {
		cfg.TTL = time.Hour
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Cache{rdb: rdb, inner: inner, logger: logger, prefix: cfg.Prefix, window: cfg.Window, ttl: cfg.TTL}
}

// cachedMessage is a message as stored in the list; the identity is the key's.
type cachedMessage struct {
	Seq       int64           `json:"s"`
	Key       string          `json:"k"`
	Role      string          `json:"r"`
	Content   string          `json:"c"`
	Raw       json.RawMessage `json:"j,omitempty"`
	Tokens    int             `json:"t"`
	CreatedAt time.Time       `json:"at"`
}

// Keys. Ids cannot contain '/', so the joins are unambiguous.
func (c *Cache) listKey(id memory.Identity) string {
	return c.prefix + "recent:" + id.Tenant + "/" + id.User + "/" + id.Conversation
}
func (c *Cache) versionKey(id memory.Identity) string { return c.listKey(id) + ":v" }
func (c *Cache) userKey(tenant, user string) string {
	return c.prefix + "recent-convs:" + tenant + "/" + user
}
func (c *Cache) erasedKey(tenant, user string) string {
	return c.prefix + "erased:" + tenant + "/" + user
}

// fillScript replaces a cached window unless a fresher one (higher version)
// is there, or the window holds a message created at or before the user's
// erasure (it was read from the store before the erasure committed). KEYS:
// list, version, user set, erasure. ARGV: version, ttl ms, oldest message's
// creation (Unix microseconds), messages.
var fillScript = redis.NewScript(`
local cur = tonumber(redis.call('GET', KEYS[2]) or '-1')
if cur > tonumber(ARGV[1]) then return 0 end
local erased = redis.call('GET', KEYS[4])
if erased and tonumber(ARGV[3]) <= tonumber(erased) then return 0 end
redis.call('DEL', KEYS[1])
if #ARGV > 3 then
  redis.call('RPUSH', KEYS[1], unpack(ARGV, 4))
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
redis.call('SADD', KEYS[3], KEYS[1])
redis.call('PEXPIRE', KEYS[3], ARGV[2])
return 1
`)

// Recent returns up to n newest live messages of the conversation, oldest
// first, from the cache when it holds them.
func (c *Cache) Recent(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error) {
	defer telemetry.Span(&ctx, "redis.Recent")()
	if n <= 0 {
		return nil, nil
	}
	if n > c.window {
		return c.inner.Recent(ctx, id, n)
	}
	msgs, hit, err := c.readWindow(ctx, id, n)
	if err != nil {
		c.logger.Warn("redis: cache read failed; reading the store", "tenant", id.Tenant, "err", err)
		return c.inner.Recent(ctx, id, n)
	}
	if hit {
		return msgs, nil
	}
	all, err := c.inner.Recent(ctx, id, c.window)
	if err != nil {
		return nil, err
	}
	if len(all) > 0 {
		if err := c.fill(ctx, id, all); err != nil {
			c.logger.Warn("redis: cache fill failed", "tenant", id.Tenant, "err", err)
		}
	}
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return all, nil
}

// readWindow reads the newest n cached messages and renews the TTLs; hit is
// false when nothing is cached.
func (c *Cache) readWindow(ctx context.Context, id memory.Identity, n int) ([]memory.Message, bool, error) {
	var lr *redis.StringSliceCmd
	_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		lr = p.LRange(ctx, c.listKey(id), int64(-n), -1)
		p.PExpire(ctx, c.listKey(id), c.ttl)
		p.PExpire(ctx, c.versionKey(id), c.ttl)
		p.PExpire(ctx, c.userKey(id.Tenant, id.User), c.ttl)
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	items := lr.Val()
	if len(items) == 0 {
		return nil, false, nil
	}
	msgs := make([]memory.Message, len(items))
	for i, it := range items {
		var cm cachedMessage
		if err := json.Unmarshal([]byte(it), &cm); err != nil {
			return nil, false, fmt.Errorf("decode cached message: %w", err)
		}
		msgs[i] = memory.Message{
			Tenant: id.Tenant, User: id.User, Conversation: id.Conversation,
			Seq: cm.Seq, Key: cm.Key, Role: cm.Role, Content: cm.Content,
			Raw: cm.Raw, Tokens: cm.Tokens, CreatedAt: cm.CreatedAt,
		}
	}
	return msgs, true, nil
}

// fill replaces the cached window with msgs (the newest live messages,
// oldest first), unless a fresher window is cached.
func (c *Cache) fill(ctx context.Context, id memory.Identity, msgs []memory.Message) error {
	keys, args, err := c.fillArgs(id, msgs)
	if err != nil {
		return err
	}
	if err := fillScript.Run(ctx, c.rdb, keys, args...).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	return nil
}

// fillArgs returns fillScript's keys and arguments for replacing id's
// cached window with msgs.
func (c *Cache) fillArgs(id memory.Identity, msgs []memory.Message) ([]string, []any, error) {
	args := make([]any, 0, len(msgs)+3)
	var version int64
	oldest := int64(math.MaxInt64)
	if len(msgs) > 0 {
		version = msgs[len(msgs)-1].Seq
	}
	for _, m := range msgs {
		oldest = min(oldest, m.CreatedAt.UnixMicro())
	}
	args = append(args, version, c.ttl.Milliseconds(), oldest)
	for _, m := range msgs {
		b, err := json.Marshal(cachedMessage{
			Seq: m.Seq, Key: m.Key, Role: m.Role, Content: m.Content,
			Raw: m.Raw, Tokens: m.Tokens, CreatedAt: m.CreatedAt,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("encode message: %w", err)
		}
		args = append(args, b)
	}
	keys := []string{c.listKey(id), c.versionKey(id), c.userKey(id.Tenant, id.User), c.erasedKey(id.Tenant, id.User)}
	return keys, args, nil
}

// SaveExchange stores ex in the backend, then brings the conversation's
// cached window up to date: it appends the stored messages when the save
// only appended (see appendScript), else reloads the window from the
// backend.
func (c *Cache) SaveExchange(ctx context.Context, ex memory.Exchange) (memory.SaveResult, error) {
	defer telemetry.Span(&ctx, "redis.SaveExchange")()
	res, err := c.inner.SaveExchange(ctx, ex)
	if err != nil || res.Duplicate || res.Dropped {
		return res, err
	}
	if appendable(res) && c.appendAll(ctx, []memory.Identity{ex.Identity}, [][]memory.Message{res.Stored}) == nil {
		return res, nil
	}
	c.refresh(ctx, ex.Identity)
	return res, nil
}

// appendable reports whether a save only appended messages, which it
// reports (memory.SaveResult.Stored): they can be appended to the cached
// window instead of reading it again.
func appendable(res memory.SaveResult) bool {
	return res.Superseded == 0 && res.Inserted > 0 && len(res.Stored) == res.Inserted
}

// appendScript appends a save's messages to a cached window that holds
// the conversation's newest live messages up to the one just before them
// (its version is the seq before theirs): no message was stored or
// superseded in between, so the window plus them, cut to its length, is
// the newest live messages again (it returns 1). Otherwise — another
// writer's messages in between, or a window not cached — it drops the list
// and sets the version to theirs, so no refill read before this save can
// pass for a later state, and returns 2: the caller reloads the window
// from the store. It does
// nothing when the cached version is theirs or newer (a fresher window, a
// deleted conversation's tombstone), or when the messages date from at or
// before the user's erasure. KEYS: list, version, user set, erasure.
// ARGV: the seq before theirs, the last one's seq, ttl ms, the oldest
// one's creation (Unix microseconds), window length, messages.
var appendScript = redis.NewScript(`
local cur = tonumber(redis.call('GET', KEYS[2]) or '-1')
if cur >= tonumber(ARGV[2]) then return 0 end
local erased = redis.call('GET', KEYS[4])
if erased and tonumber(ARGV[4]) <= tonumber(erased) then return 0 end
if cur == tonumber(ARGV[1]) and redis.call('LLEN', KEYS[1]) > 0 then
  redis.call('RPUSH', KEYS[1], unpack(ARGV, 6))
  redis.call('LTRIM', KEYS[1], -tonumber(ARGV[5]), -1)
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
  redis.call('SADD', KEYS[3], KEYS[1])
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
  return 1
end
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return 2
`)

// appendArgs returns appendScript's keys and arguments for appending msgs,
// messages of consecutive seqs, oldest first, to id's cached window.
func (c *Cache) appendArgs(id memory.Identity, msgs []memory.Message) ([]string, []any, error) {
	keys, args, err := c.fillArgs(id, msgs)
	if err != nil {
		return nil, nil, err
	}
	// fillArgs' arguments are the version (the last seq), ttl, oldest
	// creation and the messages; appendScript's add the seq before the
	// first in front and the window's length before the messages.
	args = append([]any{msgs[0].Seq - 1}, args...)
	return keys, slices.Insert(args, 4, any(c.window)), nil
}

// appendAll appends msgs[i], what saves stored in ids[i] (see
// appendScript), in one Redis round trip. It returns the ids whose windows
// it could not bring up to date, for the caller to reload: those the
// script dropped (a gap before the messages, no window cached) and those
// it failed on (logged).
func (c *Cache) appendAll(ctx context.Context, ids []memory.Identity, msgs [][]memory.Message) []memory.Identity {
	cmds, err := c.evalAll(ctx, appendScript, len(ids), func(i int) ([]string, []any, error) {
		return c.appendArgs(ids[i], msgs[i])
	})
	var reload []memory.Identity
	failed := 0
	for i, cmd := range cmds {
		switch {
		case failedCmd(cmd):
			failed++
			reload = append(reload, ids[i])
		case cmd.Val() == int64(2):
			reload = append(reload, ids[i])
		}
	}
	if failed > 0 {
		c.logger.Warn("redis: cache append after save failed; reloading the windows", "conversations", failed, "err", err)
	}
	return reload
}

// failedCmd reports whether a script run of evalAll failed.
func failedCmd(cmd *redis.Cmd) bool {
	return cmd == nil || cmd.Err() != nil && !errors.Is(cmd.Err(), redis.Nil)
}

// evalAll runs script n times in one pipeline, with the keys and arguments
// of argsFor(i), and returns each run's command (nil when it was not
// sent: see failedCmd) and the pipeline's error.
func (c *Cache) evalAll(ctx context.Context, script *redis.Script, n int, argsFor func(i int) ([]string, []any, error)) ([]*redis.Cmd, error) {
	run := func(eval func(p redis.Pipeliner, keys []string, args []any) *redis.Cmd) ([]*redis.Cmd, error) {
		cmds := make([]*redis.Cmd, n)
		_, err := c.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := range n {
				keys, args, err := argsFor(i)
				if err != nil {
					return err
				}
				cmds[i] = eval(p, keys, args)
			}
			return nil
		})
		return cmds, err
	}
	cmds, err := run(func(p redis.Pipeliner, keys []string, args []any) *redis.Cmd {
		return script.EvalSha(ctx, p, keys, args...)
	})
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// Redis lost its scripts (a restart): send the script itself.
		cmds, err = run(func(p redis.Pipeliner, keys []string, args []any) *redis.Cmd {
			return script.Eval(ctx, p, keys, args...)
		})
	}
	if err == nil {
		err = errors.New("script failed")
	}
	return cmds, err
}

// invalidate drops cached windows and leaves tombstones that keep in-flight
// refills from restoring them.
func (c *Cache) invalidate(ctx context.Context, userKey string, lists ...string) error {
	_, err := c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, l := range lists {
			p.Del(ctx, l)
			p.Set(ctx, l+":v", tombstone, tombstoneTTL)
			p.SRem(ctx, userKey, l)
		}
		return nil
	})
	return err
}

// DeleteConversation deletes the conversation from the backend and drops its
// cached window, even when the backend reports memory.ErrNotFound.
func (c *Cache) DeleteConversation(ctx context.Context, id memory.Identity) error {
	err := c.inner.DeleteConversation(ctx, id)
	if err != nil && !errors.Is(err, memory.ErrNotFound) {
		return err
	}
	if cerr := c.invalidate(ctx, c.userKey(id.Tenant, id.User), c.listKey(id)); cerr != nil {
		return fmt.Errorf("redis: clear cached conversation: %w: %w", memory.ErrUnavailable, cerr)
	}
	return err
}

// eraseScript records a user's erasure and drops every cached window of
// theirs, atomically: a fill either lands before it (and is dropped) or
// after it (and is refused by fillScript when it holds a message from before
// the erasure), so no tombstone version is needed and a fresh conversation
// is cached at once. KEYS: user set, erasure. ARGV: erasure time (Unix
// microseconds), its TTL in ms.
var eraseScript = redis.NewScript(`
local cur = tonumber(redis.call('GET', KEYS[2]) or '-1')
if tonumber(ARGV[1]) > cur then
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
else
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
for _, l in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  redis.call('DEL', l, l .. ':v')
end
redis.call('DEL', KEYS[1])
return 1
`)

// DeleteUser erases the user in the backend, then, in one step, drops every
// cached window of theirs and records the erasure time in Redis (for the
// cache TTL), so a window read from the store before the erasure can never
// be cached after it; last, it empties the embedding cache kept under the
// same prefix (clearEmbeddings), which names no owner.
func (c *Cache) DeleteUser(ctx context.Context, tenant, user string) error {
	if err := c.inner.DeleteUser(ctx, tenant, user); err != nil {
		return err
	}
	at, err := c.inner.ErasedAt(ctx, tenant, user)
	if err != nil || at.IsZero() {
		// Later than the recorded time: refuses at least as much.
		at = time.Now()
	}
	keys := []string{c.userKey(tenant, user), c.erasedKey(tenant, user)}
	err = eraseScript.Run(ctx, c.rdb, keys, at.UnixMicro(), max(c.ttl, tombstoneTTL).Milliseconds()).Err()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("redis: clear cached conversations: %w: %w", memory.ErrUnavailable, err)
	}
	// The embedding cache under the same prefix names no owner: it is
	// emptied (see EmbeddingCache).
	if _, err := clearEmbeddings(ctx, c.rdb, c.prefix); err != nil {
		return fmt.Errorf("redis: erase: %w: %w", memory.ErrUnavailable, err)
	}
	return nil
}

// PingCache reports whether Redis answers.
func (c *Cache) PingCache(ctx context.Context) error {
	if err := c.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: ping: %w", unavailable(err))
	}
	return nil
}
