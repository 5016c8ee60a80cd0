// Package compaction keeps long conversations within budget: rolling
// summaries of the messages that leave the recent window, and pinned facts —
// goals, limits, preferences and decisions the user stated — that are never
// compressed away.
package compaction

import (
	"regexp"
	"strings"
	"unicode"

	"github.com/memgate/memgate/internal/memory"
)

// maxPinLen bounds the sentence kept as a fact's value, in bytes.
const maxPinLen = 300

// DetectPins returns the standing facts a user message states — where the
// user lives, works, what they eat, their goals, limits, preferences,
// decisions and reminders — one per sentence that matches a rule (the first
// matching rule wins; questions and one-off requests such as "I want to know
// the capital of Peru" are skipped; see pinRules). Only user messages carry
// pins; the value is the sentence itself, so the specifics (amounts, dates,
// names) survive verbatim.
func DetectPins(text string) []memory.Fact {
	var out []memory.Fact
	for _, s := range Sentences(text) {
		if strings.HasSuffix(s, "?") {
			continue // a question states nothing
		}
		var hits []pinRule
		for _, r := range pinRules {
			if r.match(s) {
				hits = append(hits, r)
			}
		}
		// A sentence that states several things ("I live in Lisbon and I'm
		// vegetarian") gives one fact per clause, so a later move supersedes
		// the city without touching the diet; otherwise the first rule wins
		// and the whole sentence is the value.
		units := []string{s}
		if len(hits) > 1 {
			if cs := clauseRe.Split(s, -1); len(cs) > 1 {
				units = cs
			} else {
				hits = hits[:1]
			}
		}
		used := map[string]bool{}
		for _, r := range hits {
			v := ""
			for _, u := range units {
				if r.match(u) {
					v = strings.TrimSpace(u)
					break
				}
			}
			if v == "" || used[v] {
				continue
			}
			used[v] = true
			if len(units) > 1 && len(units[len(units)-1]) > 0 && strings.HasSuffix(s, ".") && !strings.HasSuffix(v, ".") {
				v += "."
			}
			if len(v) > maxPinLen {
				v = truncate(v, maxPinLen)
			}
			key := r.key
			if key == "" {
				key = NormalizeKey(v)
			}
			out = append(out, memory.Fact{Type: r.typ, Key: key, Value: v, Confidence: 0.6, Mentions: 1, Pinned: true})
		}
	}
	return out
}

// clauseRe splits a sentence into clauses at commas, semicolons and
// coordinating conjunctions (English and Portuguese).
var clauseRe = regexp.MustCompile(`(?i)\s*(?:[,;]\s*(?:and|but|e|mas)?|\s(?:and|but|e|mas))\s+`)

// Sentences splits text into trimmed sentences at '.', '!', '?' and line
// breaks, without splitting numbers such as "5.000" or "3.5".
func Sentences(text string) []string {
	var out []string
	start := 0
	rs := []rune(text)
	flush := func(end int) {
		s := strings.TrimSpace(string(rs[start:end]))
		if s != "" {
			out = append(out, s)
		}
		start = end
	}
	for i, r := range rs {
		switch r {
		case '\n', '!', '?':
			flush(i + 1)
		case '.':
			if i > 0 && i+1 < len(rs) && unicode.IsDigit(rs[i-1]) && unicode.IsDigit(rs[i+1]) {
				continue
			}
			flush(i + 1)
		}
	}
	flush(len(rs))
	return out
}

// NormalizeKey folds a statement to a key: lower case, letters and digits
// only, single spaces, at most 80 bytes.
func NormalizeKey(s string) string {
	var b strings.Builder
	space := false
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = false
			b.WriteRune(r)
			continue
		}
		space = true
	}
	return truncate(b.String(), 80)
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
