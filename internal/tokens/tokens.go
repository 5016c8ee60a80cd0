// Package tokens counts tokens the way OpenAI bills them: tiktoken's
// o200k_base and cl100k_base encodings, with the rank files embedded in the
// binary by tiktoken-go-loader (no network at run time); a chat message
// list's per-message and reply-priming overhead; and a model →
// context-window table.
//
// The byte-pair merge is tiktoken's; the pre-tokenizer is a hand-written
// equivalent of tiktoken's regular expressions, about ten times faster than
// evaluating them with tiktoken-go. Tests check every count against
// tiktoken-go itself.
package tokens

import (
	"fmt"
	"hash/maphash"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Encoding names.
const (
	O200kBase  = "o200k_base"
	CL100kBase = "cl100k_base"
)

// encodings holds the two encodings every Counter shares, loaded on the
// first New from the rank files embedded in tiktoken-go-loader (no network).
// They are immutable afterwards and safe for concurrent use; loading them
// once per process keeps their 30 MB of tables from being duplicated.
var encodings = sync.OnceValues(func() (map[string]*encoding, error) {
	m := make(map[string]*encoding, 2)
	for name, next := range map[string]func(string, int) int{O200kBase: nextO200k, CL100kBase: nextCL100k} {
		enc, err := loadEncoding(name, next)
		if err != nil {
			return nil, err
		}
		m[name] = enc
	}
	return m, nil
})

// Counter counts tokens per model and answers context-window sizes. It is
// safe for concurrent use.
type Counter struct {
	o200k   *encoding
	cl100k  *encoding
	windows windowTable
	// memo remembers the counts of long texts and messages, whole and
	// (long multi-line texts) line by line (segs), in scope: the owner's
	// of a view (Owned), 0 for New's counter, which counts for no one.
	memo  *memo
	segs  *segmentCache
	work  *workStats
	scope uint64
}

// Owned returns c's view for the user of a tenant: it counts as c does,
// into the same memo, but a count it remembers is found again only through
// a view of the same tenant and user — not another tenant's or user's, nor
// c's. A remembered count answers about a hundred times faster than a new
// one, so a memo all owners shared would tell a request's sender, by its
// latency, whether someone else recently had the same text counted. A
// request takes its owner's view once and counts through it; c itself is
// for counts made for no owner (tools, benchmarks).
func (c *Counter) Owned(tenant, user string) *Counter {
	v := *c
	v.scope = maphash.Comparable(c.memo.seed, [2]string{tenant, user}) | 1 // never 0, the owner-less scope
	return &v
}

// Collectors returns the Prometheus collectors of c's remembered counts
// (the "tokens" cache's hits, misses, evictions and bytes).
func (c *Counter) Collectors() []prometheus.Collector { return c.memo.counts.Collectors() }

// memoMinBytes is the length below which a text or message is counted each
// time: hashing it costs about as much.
const memoMinBytes = 64

// New returns a Counter. windows maps model names or prefixes to context
// windows in tokens; it overrides and extends the built-in table (see
// ContextWindow). The first call loads the embedded encodings (a few hundred
// milliseconds); later calls share them.
func New(windows map[string]int) (*Counter, error) {
	for k, v := range windows {
		if k == "" || v <= 0 {
			return nil, fmt.Errorf("context window %q: %d: must be a non-empty model and a positive size", k, v)
		}
	}
	encs, err := encodings()
	if err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	m, w := newMemo(), &workStats{}
	return &Counter{
		o200k:   encs[O200kBase],
		cl100k:  encs[CL100kBase],
		windows: newWindowTable(windows),
		memo:    m,
		segs:    newSegmentCache(m, w),
		work:    w,
	}, nil
}

// Encoding returns the name of the encoding used for model: cl100k_base for
// gpt-4 (but not gpt-4o, gpt-4.1 or gpt-4.5), gpt-3.5 and the text-embedding
// models; o200k_base for everything else, unknown models included. A
// fine-tune prefix ("ft:") and a provider prefix ("openai/") are ignored.
func Encoding(model string) string {
	m := baseModel(model)
	switch {
	case strings.HasPrefix(m, "gpt-4o"), strings.HasPrefix(m, "gpt-4.1"), strings.HasPrefix(m, "gpt-4.5"):
		return O200kBase
	case strings.HasPrefix(m, "gpt-4"), strings.HasPrefix(m, "gpt-3.5"), strings.HasPrefix(m, "gpt-35"),
		strings.HasPrefix(m, "text-embedding-"):
		return CL100kBase
	}
	return O200kBase
}

// baseModel strips a provider prefix ("openai/gpt-4o") and a fine-tune prefix
// ("ft:gpt-4o-mini:org::id") from a model name.
func baseModel(model string) string {
	m := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	return strings.TrimPrefix(m, "ft:")
}

// encoder returns the encoder for model.
func (c *Counter) encoder(model string) *encoding {
	if Encoding(model) == CL100kBase {
		return c.cl100k
	}
	return c.o200k
}

// Text returns the number of tokens s encodes to for model. Special-token
// text such as "<|endoftext|>" is counted as ordinary text, as it is when it
// appears in a chat message. Long texts are counted once and remembered —
// stored turns, summaries and passages come back request after request —
// and so are the lines of long multi-line texts (a prompt's memory block),
// which recur in texts that differ (segmentCache).
func (c *Counter) Text(model, s string) int {
	if s == "" {
		return 0
	}
	e := c.encoder(model)
	if len(s) < memoMinBytes {
		return e.count(s)
	}
	return c.memo.count(c.scope, kindText, e, s, nil, func() int { return c.segs.count(c.scope, e, s) })
}

// ContextWindow returns model's context window in tokens: the configured or
// built-in entry whose key is the longest prefix of the model name, or
// DefaultContextWindow (128000) when none matches. Built-in: gpt-4o and
// gpt-4o-mini 128000, gpt-4.1* 1047576, gpt-4-turbo 128000, gpt-4 8192,
// gpt-3.5-turbo 16385, o1/o3/o4-mini 200000, gpt-5* 400000.
func (c *Counter) ContextWindow(model string) int {
	return c.windows.lookup(baseModel(model))
}

// Work returns what c has tokenized so far.
func (c *Counter) Work() Work {
	return c.work.load()
}
