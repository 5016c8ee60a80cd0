package proxy

import (
	"crypto/sha256"
	"encoding/binary"
	"hash/maphash"

	lru "github.com/hashicorp/golang-lru/v2"
)

// A provider bills a prompt's prefix that repeats an earlier request's,
// byte for byte from the first byte, at a fraction of the input price
// (OpenAI's automatic prompt caching, Anthropic's cache_control).
// prefixes measures how much of each memory-on request's upstream body
// repeats the previous request's of the same conversation.
//
// It keeps, per conversation, the chained hashes of the previous body's
// prefixes at every prefixChunk bytes (a few hundred bytes per
// conversation, never the text): the repeated prefix is the longest
// run of equal hashes, so it is measured to within prefixChunk bytes,
// from below. Conversations are keyed by a hash of tenant, user,
// conversation, API and model, and each request only learns its own
// conversation's count: nothing crosses tenants or users. The table is
// an LRU of at most prefixEntries conversations.

// prefixChunk is the granularity of the measure, in bytes.
const prefixChunk = 256

// prefixEntries bounds the conversations remembered; prefixMaxChunks
// bounds each one's hashes (a prefix longer than 512 KiB counts as 512 KiB).
const (
	prefixEntries   = 4096
	prefixMaxChunks = 2048
)

// prefixKey identifies a conversation's prompt cache.
type prefixKey [sha256.Size]byte

// newPrefixKey returns the key of a conversation's requests to model
// through api.
func newPrefixKey(tenant, user, conversation, api, model string) prefixKey {
	h := sha256.New()
	for _, s := range []string{tenant, user, conversation, api, model} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	var k prefixKey
	h.Sum(k[:0])
	return k
}

// prefixes is the table: an LRU of each conversation's previous body, as
// chained hashes. It is safe for concurrent use (two requests of one
// conversation racing measure against whichever came first).
type prefixes struct {
	seed maphash.Seed
	lru  *lru.Cache[prefixKey, []uint64]
}

func newPrefixes() *prefixes {
	c, _ := lru.New[prefixKey, []uint64](prefixEntries) // errors only on a size <= 0
	return &prefixes{seed: maphash.MakeSeed(), lru: c}
}

// chain returns the chained hashes of body's whole prefixChunk-byte
// prefixes: hashes[i] covers body[:(i+1)*prefixChunk].
func (t *prefixes) chain(body []byte) []uint64 {
	n := min(len(body)/prefixChunk, prefixMaxChunks)
	out := make([]uint64, n)
	var h maphash.Hash
	h.SetSeed(t.seed)
	for i := range n {
		h.Write(body[i*prefixChunk : (i+1)*prefixChunk])
		out[i] = h.Sum64() // the hash of everything written so far
	}
	return out
}

// repeat records body as the conversation's newest and returns how many of
// its leading bytes repeat the previous body's (0 for the first).
func (t *prefixes) repeat(k prefixKey, body []byte) int {
	hs := t.chain(body)
	prev, _ := t.lru.Get(k)
	t.lru.Add(k, hs)
	same := 0
	for same < len(hs) && same < len(prev) && hs[same] == prev[same] {
		same++
	}
	return same * prefixChunk
}

// repeatedTokens estimates the prompt tokens of a body of n bytes costing
// tokens whose first repeated bytes repeat the previous request's: the
// same share of the tokens.
func repeatedTokens(repeated, n, tokens int) int {
	if n <= 0 || repeated <= 0 {
		return 0
	}
	return int(int64(tokens) * int64(min(repeated, n)) / int64(n))
}
