package enrich

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/memgate/memgate/internal/memory"
)

// Input is what a summariser folds into a new summary version: the previous
// summary (nil for the first) and the messages leaving the recent window.
type Input struct {
	Previous  *memory.Summary
	Messages  []memory.Message
	MaxTokens int
}

// Output is a summariser's answer, the JSON shape asked of the model.
type Output struct {
	Summary   string           `json:"summary"`
	KeyEvents []string         `json:"key_events"`
	Preserved memory.Preserved `json:"preserved"`
}

// Extractive is the deterministic summariser used when the model summariser
// keeps failing: no LLM, it keeps the sentences that carry specifics —
// numbers, dates, names, decisions, goals — newest last, within MaxTokens.
type Extractive struct {
	// count returns the tokens of a text.
	count func(string) int
}

// NewExtractive returns an extractive summariser counting tokens with count.
func NewExtractive(count func(string) int) *Extractive { return &Extractive{count: count} }

var (
	numberRe = regexp.MustCompile(`\d[\d.,]*\d|\d`)
	dateRe   = regexp.MustCompile(`(?i)\b(\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}(/\d{2,4})?|(jan|feb|fev|mar|apr|abr|may|mai|jun|jul|aug|ago|sep|set|oct|out|nov|dec|dez)[a-zç]*\.?( \d{1,2})?|monday|tuesday|wednesday|thursday|friday|saturday|sunday|segunda|terça|quarta|quinta|sexta|sábado|domingo|tomorrow|amanhã)\b`)
	nameRe   = regexp.MustCompile(`\b[A-Z][a-zà-ÿ]+\b`)
	moneyRe  = regexp.MustCompile(`(?i)(R\$|US\$|\$|€|£|\beuros?\b|\breais\b|\bdollars?\b)`)
)

// scoreSentence rates how much a sentence must survive compaction.
func scoreSentence(s string, first bool) int {
	score := 0
	if numberRe.MatchString(s) {
		score += 2
	}
	if moneyRe.MatchString(s) {
		score += 2
	}
	if dateRe.MatchString(s) {
		score += 2
	}
	if len(DetectPins(s)) > 0 {
		score += 3
	}
	names := nameRe.FindAllString(s, -1)
	if !first && len(names) > 0 || len(names) > 1 {
		score++
	}
	return score
}

// maxSummaryScanBytes bounds the bytes of in.Messages Summarize scores
// (each message counted up to maxScanBytes, what it reads of one), the
// newest messages first: a first request resending a long history hands
// it thousands of messages at once, whose sentences cost tens of
// microseconds each to score (2,000 messages of short sentences, 4
// CPU-seconds), for a summary of MaxTokens.
const maxSummaryScanBytes = 64 << 10

// Summarize builds the next summary from in without calling any model,
// scoring each message's first maxScanBytes of sentences, of the newest
// messages that together hold maxSummaryScanBytes.
func (e *Extractive) Summarize(_ context.Context, in Input) (Output, error) {
	type cand struct {
		text  string
		score int
		order int
	}
	var cands []cand
	order := 0
	// A sentence said again (the same words, any case, spacing or
	// punctuation) is a candidate once: a summary never pays twice for one
	// line.
	seen := map[string]bool{}
	fresh := func(text string) bool {
		k := foldWords(text)
		if seen[k] {
			return false
		}
		seen[k] = true
		return true
	}
	if in.Previous != nil {
		for _, s := range Sentences(in.Previous.Text) {
			if fresh(s) {
				cands = append(cands, cand{s, scoreSentence(s, true) + 1, order})
				order++
			}
		}
	}
	from, read := len(in.Messages), 0
	for from > 0 && read < maxSummaryScanBytes {
		from--
		if m := in.Messages[from]; m.Role == "user" || m.Role == "assistant" {
			read += min(len(m.Content), maxScanBytes)
		}
	}
	var out Output
	for _, m := range in.Messages[from:] {
		// Only the user's and the assistant's words, as the model
		// summariser reads them: a tool's or a legacy function's result is
		// a third party's text, and any role but the assistant's would be
		// written as the user's below.
		if m.Role != "user" && m.Role != "assistant" {
			continue
		}
		who := "User"
		if m.Role == "assistant" {
			who = "Assistant"
		}
		for i, s := range leadingSentences(m.Answer()) {
			sc := scoreSentence(s, i == 0)
			if m.Role == "user" {
				sc++
			}
			if sc < 2 {
				continue
			}
			text := fmt.Sprintf("%s: %s", who, s)
			if !fresh(text) {
				continue
			}
			cands = append(cands, cand{text, sc, order})
			order++
			out.Preserved.Numbers = append(out.Preserved.Numbers, numberRe.FindAllString(s, -1)...)
			out.Preserved.Dates = append(out.Preserved.Dates, dateRe.FindAllString(s, -1)...)
			if m.Role == "user" {
				for _, f := range DetectPins(s) {
					if f.Type == memory.FactDecision {
						out.Preserved.Decisions = append(out.Preserved.Decisions, f.Value)
					}
				}
			}
		}
	}
	// Keep the best-scored sentences that fit (newest first among equals),
	// then restore their order.
	idx := make([]int, len(cands))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ca, cb := cands[idx[a]], cands[idx[b]]
		if ca.score != cb.score {
			return ca.score > cb.score
		}
		return ca.order > cb.order
	})
	keep := make([]bool, len(cands))
	budget := in.MaxTokens
	for _, i := range idx {
		if n := e.count(cands[i].text) + 1; n <= budget {
			keep[i] = true
			budget -= n
		}
	}
	var lines []string
	for i, c := range cands {
		if keep[i] {
			lines = append(lines, c.text)
			if c.score >= 5 {
				out.KeyEvents = append(out.KeyEvents, c.text)
			}
		}
	}
	out.Summary = strings.Join(lines, "\n")
	return out, nil
}
