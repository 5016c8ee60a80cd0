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

// pinRule recognises one kind of statement. When Key is empty the fact's key
// is its normalised sentence, so each distinct goal or decision is its own
// fact; a fixed Key ("city") makes a newer statement supersede an older one.
type pinRule struct {
	typ memory.FactType
	key string
	re  *regexp.Regexp
}

// pinRules are the English and Portuguese patterns of statements worth
// pinning. They match at word boundaries, case-insensitively.
var pinRules = []pinRule{
	// Where the user lives: a newer statement supersedes the older one.
	{memory.FactProfile, "city", regexp.MustCompile(`(?i)\b(i live in|i'm living in|i am living in|i moved to|i've moved to|i have moved to|i'm moving to|moro em|eu moro em|me mudei para|mudei-me para|estou morando em)\b`)},
	{memory.FactProfile, "name", regexp.MustCompile(`(?i)\b(my name is|call me|meu nome é|me chamo)\b`)},
	{memory.FactProfile, "diet", regexp.MustCompile(`(?i)\b(i'm (?:a )?(?:vegetarian|vegan|pescatarian|pescetarian)|i am (?:a )?(?:vegetarian|vegan|pescatarian|pescetarian)|i don't eat meat|i do not eat meat|sou (?:vegetarian|vegan|pescetarian|pescatarian)[oa]|não como carne)\b`)},
	{memory.FactProfile, "job", regexp.MustCompile(`(?i)\b(i work as|i'm working as|i am working as|i work at|i work for|my job is|my new job is|i started working as|i started working at|trabalho como|trabalho na|trabalho no|trabalho em|meu trabalho é)\b`)},
	{memory.FactLimit, "", regexp.MustCompile(`(?i)\b(i'm allergic to|i am allergic to|i can't eat|i cannot eat|i can't afford|my budget is|my limit is|never more than|no more than|sou alérgic[oa] a|não posso comer|meu orçamento é|meu limite é|no máximo)\b`)},
	{memory.FactGoal, "", regexp.MustCompile(`(?i)\b(i want to save|i want to|i'd like to|i would like to|i need to|i plan to|i'm planning to|my goal is|i'm trying to|i hope to|remind me if|remind me when|remind me to|quero economizar|quero juntar|quero|preciso|pretendo|meu objetivo é|minha meta é|me avise se|me avise quando|me lembre de|me lembra de)\b`)},
	{memory.FactPreference, "", regexp.MustCompile(`(?i)\b(i (?:always |really |usually |generally |much )?prefer|i'd rather|i would rather|i like|i love|i hate|i don't like|i dislike|please always|please never|prefiro|eu gosto de|não gosto de|odeio|adoro)\b`)},
	{memory.FactDecision, "", regexp.MustCompile(`(?i)\b(i decided|i've decided|i have decided|i'm going with|i chose|i've chosen|we decided|let's go with|decidi|decidimos|vou ficar com|escolhi)\b`)},
}

// maxPinLen bounds the sentence kept as a fact's value, in bytes.
const maxPinLen = 300

// DetectPins returns the facts a user message states, one per sentence that
// matches a rule (the first matching rule wins; questions are skipped). Only user messages carry
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
			if r.re.MatchString(s) {
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
				if r.re.MatchString(u) {
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
