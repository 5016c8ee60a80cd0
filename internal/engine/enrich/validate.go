package enrich

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"unicode"

	"github.com/memgate/memgate/internal/memory"
)

// ErrSummaryRejected reports a summary that parsed but fails CheckSummary:
// it echoes the summariser's instructions, says nothing of the conversation,
// or is too long. The compactor stores the extractive summary instead. Such
// errors also match ErrBadReply.
var ErrSummaryRejected = errors.New("summary rejected")

// rejected returns an error matching ErrSummaryRejected and ErrBadReply.
func rejected(format string, args ...any) error {
	return fmt.Errorf("%w: %w: %s", ErrBadReply, ErrSummaryRejected, fmt.Sprintf(format, args...))
}

// Thresholds of CheckSummary.
const (
	// minGrounded is the least share of a summary's content words that
	// must occur in what it summarises (the previous summary and the new
	// messages). A faithful summary, even a paraphrase, shares most of its
	// names, numbers and topic words with its source; a reply about the
	// task ("Here is the summary you asked for") shares none.
	minGrounded = 0.25
	// maxEchoed is how many word 4-grams of the instructions a summary may
	// repeat; maxEchoShare bounds their share of a short summary's 4-grams.
	maxEchoed    = 2
	maxEchoShare = 0.3
	// maxOverLength is how far past the requested size a summary may run.
	maxOverLength = 1.5
)

// templateMarkers are fragments of the summariser's prompt that a summary
// never contains unless it copies the prompt.
var templateMarkers = []string{"previous summary:", "new messages:", "keep the summary under", "key_events", "reply with json", "that reply was invalid", "json object only"}

// instructionGrams are the word 4-grams of everything the summariser is
// told besides the conversation.
var instructionGrams = grams(systemPrompt + "\nPrevious summary:\nNew messages:\nKeep the summary under tokens.\nThat reply was invalid. Reply again with the JSON object only.")

// CheckSummary reports whether out is a summary of in worth storing, and
// why not (an error wrapping ErrSummaryRejected): it must not echo the
// summariser's instructions or prompt template, its content words must come
// mostly from the messages it summarises (or the previous summary), and it
// must stay within 1.5× in.MaxTokens as count measures it (when both are
// set). A source without any content word (small talk such as "ok",
// "thanks") accepts any summary that passes the other checks.
func CheckSummary(in Input, out Output, count func(string) int) error {
	text := strings.TrimSpace(out.Summary)
	if text == "" {
		return rejected("empty summary")
	}
	lower := strings.ToLower(text)
	for _, m := range templateMarkers {
		if strings.Contains(lower, m) {
			return rejected("it repeats the prompt template (%q)", m)
		}
	}
	sg := grams(text)
	echoed := 0
	for g := range sg {
		if instructionGrams[g] {
			echoed++
		}
	}
	if echoed > maxEchoed || (echoed > 0 && float64(echoed) >= maxEchoShare*float64(len(sg))) {
		return rejected("it repeats the summariser's instructions (%d phrases)", echoed)
	}
	if count != nil && in.MaxTokens > 0 {
		if n := count(text); float64(n) > maxOverLength*float64(in.MaxTokens) {
			return rejected("%d tokens, the limit is %d", n, in.MaxTokens)
		}
	}
	var src strings.Builder
	if in.Previous != nil {
		src.WriteString(in.Previous.Text)
		src.WriteByte('\n')
	}
	for _, m := range in.Messages {
		if !memory.IsSystem(m.Role) {
			src.WriteString(m.Answer()) // as the summariser read it
			src.WriteByte('\n')
		}
	}
	source := stems(nil, src.String())
	if len(source) == 0 {
		return nil
	}
	if shared, n := grounded(text, source); n == 0 || float64(shared) < minGrounded*float64(n) {
		return rejected("%d of its %d content words occur in the conversation", shared, n)
	}
	return nil
}

// stems adds the stems of text's content words to set (nil: a new one)
// and returns it.
func stems(set map[string]bool, text string) map[string]bool {
	if set == nil {
		set = map[string]bool{}
	}
	for _, w := range contentWords(text) {
		set[stem(w)] = true
	}
	return set
}

// statedStems adds to set (nil: a new one) the stems of what text
// states: the content words of its sentences that are not questions (a
// question states nothing, as Detect has it). It returns the set.
func statedStems(set map[string]bool, text string) map[string]bool {
	if set == nil {
		set = map[string]bool{}
	}
	for _, s := range Sentences(text) {
		if !strings.HasSuffix(s, "?") {
			stems(set, s)
		}
	}
	return set
}

// grounded returns how many of text's n distinct content-word stems are
// in source.
func grounded(text string, source map[string]bool) (shared, n int) {
	words := stems(nil, text)
	return sharedStems(words, source), len(words)
}

// sharedStems returns how many of words are in source.
func sharedStems(words, source map[string]bool) int {
	shared := 0
	for w := range words {
		if source[w] {
			shared++
		}
	}
	return shared
}

// minDecisionGrounded is the least share of a preserved decision's
// content words that the user's own messages must hold for it to be
// pinned as the user's (usersDecisions).
const minDecisionGrounded = 0.5

// stemmed is a user message's key and the content-word stems of what it
// states (statedStems).
type stemmed struct {
	key   string
	stems map[string]bool
}

// userStems returns the stated stems of each user message of msgs not
// broken off, in order.
func userStems(msgs []memory.Message) []stemmed {
	var out []stemmed
	for _, m := range msgs {
		if m.Role == "user" && !m.Failed() {
			out = append(out, stemmed{m.Key, statedStems(nil, m.Content)})
		}
	}
	return out
}

// usersDecisions returns the decisions (a summariser's preserved ones)
// whose content words come mostly from what the user's messages among
// msgs state, not what they ask: what the user decided, not what the
// assistant's replies (which may repeat a fetched page) said, which a
// model summariser lists too. Only those are pinned as the user's
// standing decisions, each with sources[i], the key of the user message
// it is stated in (statedBy). The messages are read once, however many
// decisions there are.
func usersDecisions(decisions []string, msgs []memory.Message) (kept, sources []string) {
	if len(decisions) == 0 {
		return nil, nil
	}
	users := userStems(msgs)
	source := map[string]bool{}
	for _, m := range users {
		maps.Copy(source, m.stems)
	}
	for _, d := range decisions {
		if shared, n := grounded(d, source); n > 0 && float64(shared) >= minDecisionGrounded*float64(n) {
			kept, sources = append(kept, d), append(sources, statedBy(d, users))
		}
	}
	return kept, sources
}

// statedBy returns the key of the user message of users (userStems)
// that holds the most of decision's content-word stems (the first of
// those), "" when none holds any: the message a pinned decision is
// recorded as stated in.
func statedBy(decision string, users []stemmed) string {
	words := stems(nil, decision)
	key, best := "", 0
	for _, m := range users {
		if shared := sharedStems(words, m.stems); shared > best {
			key, best = m.key, shared
		}
	}
	return key
}

// grams returns the set of lower-case word 4-grams of s.
func grams(s string) map[string]bool {
	ws := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	out := map[string]bool{}
	for i := 0; i+4 <= len(ws); i++ {
		out[strings.Join(ws[i:i+4], " ")] = true
	}
	return out
}

// contentWords returns the lower-case words of s that carry content: not
// stop words, not words every summary uses ("user", "conversation"), and
// at least three letters unless they hold a digit.
func contentWords(s string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}) {
		digit := strings.IndexFunc(w, unicode.IsDigit) >= 0
		if (!digit && len([]rune(w)) < 3) || stopWords[w] || summaryWords[w] {
			continue
		}
		out = append(out, w)
	}
	return out
}

// stem folds inflections crudely to the first five letters, so
// "planning" meets "planned" and "economizar" meets "economizou" (though
// "saving" still misses "save"). It errs towards matching, which only makes
// CheckSummary more lenient.
func stem(w string) string {
	rs := []rune(w)
	if len(rs) > 5 {
		rs = rs[:5]
	}
	return string(rs)
}

// summaryWords are words any summary may use without taking them from the
// conversation.
var summaryWords = setOf(`user users assistant assistants conversation conversations summary summaries chat discussed discuss discusses
mentioned mentions mention said says told asked asks talked talks stated states wants wanted likes shared noted explained
usuário usuária assistente conversa resumo disse falou pediu mencionou contou quer gosta`)

// stopWords are English and Portuguese function words.
var stopWords = setOf(`the and but for nor yet not are was were been being have has had having does did doing done will would shall should can could may might must
this that these those there here then than them they their theirs what which who whom whose when where why how all any both each few more most other some such
only own same too very just also into onto from with without about above below over under again further once off out
its it's his her hers him she he you your yours our ours we us me my mine myself yourself himself herself itself ourselves themselves
i'm i've i'd i'll don't didn't doesn't isn't aren't wasn't weren't won't can't couldn't shouldn't wouldn't
because while until upon after before between through during per via yes okay
que para com por uma umas uns dos das nos nas num numa pelo pela pelos pelas ele ela eles elas você vocês seu sua seus suas
meu minha meus minhas nosso nossa isso isto aquilo esse essa este esta aquele aquela mas mais muito muita como quando onde
qual quais quem também já ainda então porque pois sim não está estão estava foi foram ser ter tem tinha são era há sobre entre até sem`)

func setOf(words string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.Fields(words) {
		out[w] = true
	}
	return out
}
