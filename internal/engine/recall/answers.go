package recall

import (
	"crypto/sha256"
	"time"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
)

// The fact extraction model's answers, kept in process memory: enrichment
// is at-least-once, and a round that asked the model but could not record
// the facts (the store failed, the round's conversation lease was lost) or
// could not acknowledge its entries (it lost Redis) is redone, here or by
// the enricher that reclaims it. The side model is paid on the operator's
// key and, at temperature 0, answers a question as it did: the answer is
// reused. Records of a reused answer change nothing the first recorded
// (a fact stated again from its message counts no mention more). An
// answer kept for a user erased since is never recorded: the store
// refuses the write (memory.ErrErased); the erasure drops the user's
// answers (Answers.Forget, as cache.Reads.DeleteUser calls it), since
// they hold what the user said — in the process that serves it; another
// process drops them on the erasure's notice (with Redis), and serves none
// older than cache.UnrevisedMaxAge in any case, as with its cached vectors.

// answersBytes bounds the answers kept: a few thousand, more than the
// exchanges enriched between a round and its redelivery
// (capture.reclaim_after later).
const answersBytes = 4 << 20

// answerKey names the answer to a question of a user: the model asked and
// the user text, hashed.
type answerKey = cache.Key[[sha256.Size]byte]

// answerKey returns the key of the answer to input, the question of ex.
func (e *Extractor) answerKey(ex memory.Exchange, input string) answerKey {
	h := sha256.New()
	h.Write([]byte(e.opts.Model))
	h.Write([]byte{0})
	h.Write([]byte(input))
	k := answerKey{Tenant: ex.Tenant, User: ex.User}
	h.Sum(k.Of[:0])
	return k
}

// answerSize is what an answer holds, for the cache's bound.
func answerSize(k answerKey, facts []memory.Fact) int {
	return len(k.Tenant) + len(k.User) + len(k.Of) + cache.Sum(facts, func(f memory.Fact) int {
		return 160 + len(f.Type) + len(f.Key) + len(f.Value)
	})
}

// Answers are the fact extraction model's answers an Extractor keeps
// (ExtractorOptions.Answers), per user and question.
type Answers struct {
	c *cache.Cache[answerKey, []memory.Fact]
}

// NewAnswers returns an empty Answers.
func NewAnswers() *Answers {
	return &Answers{c: cache.New("fact_answers", answersBytes, answerSize).ExpireAfter(cache.UnrevisedMaxAge, time.Now)}
}

// Forget drops the answers to the user of tenant (erased): nothing of
// what they said waits for eviction (cache.Forgetter).
func (a *Answers) Forget(tenant, user string) {
	a.c.Forget(tenant, user)
}

// Clear drops every answer (erasures may have been missed).
func (a *Answers) Clear() { a.c.Clear() }
