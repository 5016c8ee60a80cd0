package anthropic

import (
	"encoding/json"
	"math"
	"strings"

	"github.com/memgate/memgate/internal/memory"
)

// TokenCounter is what Counter wraps and implements: inject's token counter
// (*tokens.Counter implements it).
type TokenCounter interface {
	Messages(model string, msgs []json.RawMessage) int
	RawMessage(model string, raw json.RawMessage) int
	Message(model string, m memory.Message) int
	Text(model, s string) int
	SystemMessage(model, text string) int
	ContextWindow(model string) int
}

// Estimate weights; see Counter.
const (
	// PerO200k scales the o200k_base token count.
	PerO200k = 1.3
	// PerLatinExtended is added per character in U+0080–U+036F (accented
	// Latin letters): text in French, German, Spanish or Portuguese, which
	// Claude's tokenizer splits much finer than o200k_base does.
	PerLatinExtended = 3.0
	// PerOtherNonASCII is added per character from U+0370 on (Cyrillic,
	// Arabic, Devanagari, CJK, Hangul, emoji), which Claude's tokenizer
	// encodes at about one token per character.
	PerOtherNonASCII = 1.1
	// NewTokenizer scales the estimate for models with Anthropic's newer
	// tokenizer (Claude Opus 4.7 and later), which Anthropic documents as
	// producing about 30 percent more tokens for the same text.
	NewTokenizer = 1.35
	// ContextWindow is a Claude model's context window when the wrapped
	// counter knows none for it.
	ContextWindow = 200000
)

// Counter counts tokens for Claude models, whose tokenizer is not published,
// with an upper-bound estimate, and passes every other model to the wrapped
// counter. It is safe for concurrent use when the wrapped counter is.
//
// The estimate of a text is
//
//	ceil(PerO200k·o200k + PerLatinExtended·latin + PerOtherNonASCII·other)
//
// where o200k is the text's o200k_base count, latin the characters in
// U+0080–U+036F and other the characters from U+0370 on; it is multiplied by
// NewTokenizer for models with the newer tokenizer. A message costs its
// wrapped count (o200k, chat framing included) scaled the same way, the
// characters counted over its text.
//
// Measured error (TestClaudeEstimateBound, testdata/claude_tokens.json): over
// 32 samples, 123 KB of English prose, legal text, chat, Markdown, Go,
// Python, JavaScript, HTML, YAML, a Makefile, JSON, numbers, ids,
// base64, URLs, German, French, Spanish, Portuguese, Russian, Chinese,
// Japanese, Korean, Arabic, Hindi and emoji, the estimate for a Claude 3–4.6
// model is never below the reference count and at most 2.38 times it (median
// 1.26): the lowest margin is 8.9% (URLs and paths), then 10.4% (Go code).
// The reference is Claude's tokenizer as shipped by the ai-tokenizer package
// ("claude" encoding, which its authors validated at 97–99% of the token
// counts the Anthropic API reports for Claude 3 through 4.5) and, where
// larger, Anthropic's own @anthropic-ai/tokenizer; the two agree within 6%.
// The 8.9% margin covers the encoding's up-to-3% error. Overcounting only
// makes memgate trim history earlier than needed; undercounting would
// overflow the model's window, so the weights err high. Images and documents
// keep the wrapped counter's estimate, scaled.
type Counter struct {
	base TokenCounter
	// unknown is the window base answers for a model it does not know.
	unknown int
}

// NewCounter returns a Counter over base, which answers unknown
// (tokens.DefaultContextWindow) as the context window of a model it does
// not know.
func NewCounter(base TokenCounter, unknown int) *Counter {
	return &Counter{base: base, unknown: unknown}
}

// IsClaude reports whether model is an Anthropic Claude model ("claude-…",
// also behind a provider prefix such as "anthropic/").
func IsClaude(model string) bool {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	return strings.HasPrefix(m, "claude")
}

// newTokenizer reports whether a Claude model uses the newer tokenizer: any
// model that is not one of the Claude 2, 3 and 4 models up to Opus 4.6,
// Sonnet 4.6 and Haiku 4.5, so that a model this list does not know yet is
// counted high.
func newTokenizer(model string) bool {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	for _, old := range []string{"claude-2", "claude-instant", "claude-3", "claude-sonnet-4", "claude-haiku-4"} {
		if strings.HasPrefix(m, old) {
			return false
		}
	}
	if rest, ok := strings.CutPrefix(m, "claude-opus-4"); ok {
		// claude-opus-4-20250514, claude-opus-4-1, … claude-opus-4-6.
		minor, _, _ := strings.Cut(strings.TrimPrefix(rest, "-"), "-")
		return !(minor == "" || len(minor) == 8 || len(minor) == 1 && minor[0] <= '6')
	}
	return true
}

// scale turns a wrapped (o200k) count over text into the Claude estimate.
func scale(model string, n int, text string) int {
	var latin, other int
	for _, r := range text {
		switch {
		case r < 0x80:
		case r < 0x370:
			latin++
		default:
			other++
		}
	}
	est := PerO200k*float64(n) + PerLatinExtended*float64(latin) + PerOtherNonASCII*float64(other)
	if newTokenizer(model) {
		est *= NewTokenizer
	}
	return int(math.Ceil(est))
}

// Text returns the estimate for s (see Counter); other models' counts come
// from the wrapped counter.
func (c *Counter) Text(model, s string) int {
	n := c.base.Text(model, s)
	if !IsClaude(model) || s == "" {
		return n
	}
	return scale(model, n, s)
}

// RawMessage returns the estimate for one chat message: the wrapped count,
// framing included, scaled over the message's text.
func (c *Counter) RawMessage(model string, raw json.RawMessage) int {
	n := c.base.RawMessage(model, raw)
	if !IsClaude(model) {
		return n
	}
	text := string(raw)
	if m, err := memory.ParseMessage(raw); err == nil {
		text = m.Content
	}
	return scale(model, n, text)
}

// Message returns the estimate for one message: other models' counts come
// from the wrapped counter (from what memory.ParseMessage read of m.Raw);
// a Claude model's is RawMessage's for m.Raw, or, for a message without
// Raw, the wrapped count scaled over its Content.
func (c *Counter) Message(model string, m memory.Message) int {
	if !IsClaude(model) {
		return c.base.Message(model, m)
	}
	if len(m.Raw) > 0 {
		return c.RawMessage(model, m.Raw)
	}
	return scale(model, c.base.Message(model, m), m.Content)
}

// SystemMessage returns what RawMessage returns for the message
// {"role":"system","content":text}, without encoding and parsing it.
func (c *Counter) SystemMessage(model, text string) int {
	n := c.base.SystemMessage(model, text)
	if !IsClaude(model) {
		return n
	}
	return scale(model, n, text)
}

// Messages returns the estimate for a request with msgs: the sum of
// RawMessage plus the scaled reply priming.
func (c *Counter) Messages(model string, msgs []json.RawMessage) int {
	if !IsClaude(model) {
		return c.base.Messages(model, msgs)
	}
	n := scale(model, c.base.Messages(model, nil), "")
	for _, m := range msgs {
		n += c.RawMessage(model, m)
	}
	return n
}

// ContextWindow returns the wrapped counter's window, or ContextWindow for a
// Claude model the wrapped counter does not know (it answers the unknown
// window given to NewCounter).
func (c *Counter) ContextWindow(model string) int {
	w := c.base.ContextWindow(model)
	if IsClaude(model) && w == c.unknown {
		return ContextWindow
	}
	return w
}
