package standin

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// sideCall answers one of memgate's own JSON-object requests, telling them
// apart by the system prompt: summaries mention a summary, extraction
// mentions facts.
func sideCall(msgs []Message) (Kind, string) {
	var system, input strings.Builder
	for _, m := range msgs {
		if m.Role == "system" || m.Role == "developer" {
			system.WriteString(m.Content + "\n")
			continue
		}
		if m.Role == "user" {
			input.WriteString(m.Content + "\n")
		}
	}
	sys := strings.ToLower(system.String())
	switch {
	case strings.Contains(sys, "summary"):
		return KindSummary, Summary(input.String())
	case strings.Contains(sys, "fact"):
		return KindFacts, Facts(input.String())
	}
	return KindJSON, "{}"
}

// summaryReply is the JSON memgate's summariser asks for.
type summaryReply struct {
	Summary   string   `json:"summary"`
	KeyEvents []string `json:"key_events"`
	Preserved struct {
		Numbers   []string `json:"numbers"`
		Dates     []string `json:"dates"`
		Decisions []string `json:"decisions"`
	} `json:"preserved"`
}

var (
	maxTokensRe = regexp.MustCompile(`(?i)under (\d+) tokens`)
	numberRe    = regexp.MustCompile(`\d[\d.,]*\d|\d`)
	dateRe      = regexp.MustCompile(`(?i)\b\d{1,2} (?:de )?(?:january|february|march|april|may|june|july|august|september|october|november|december|janeiro|fevereiro|março|abril|maio|junho|julho|agosto|setembro|outubro|novembro|dezembro)\b`)
	monthRe     = regexp.MustCompile(`(?i)\b(?:january|february|march|april|may|june|july|august|september|october|november|december|janeiro|fevereiro|março|abril|maio|junho|julho|agosto|setembro|outubro|novembro|dezembro)\b`)
	statedRe    = regexp.MustCompile(`(?i)\b(?:i (?:always |really |usually )?(?:prefer|love|like)|i'd rather|i hate|i want|my goal|i plan|i'm planning|i need to|i moved|i live|i work|i'm a|i am a|i'm (?:vegan|vegetarian|pescatarian)|i decided|my budget|budget|prefiro|gosto de|quero|minha meta|meu objetivo|moro em|mudei|orçamento|decidi|se chama|named|called)\b`)
	decidedRe   = regexp.MustCompile(`(?i)\b(?:i decided|i've decided|decidi|decidimos|i chose|escolhi)\b`)
)

// Summary returns the stand-in summariser's JSON reply for a summary request:
// the previous summary's sentences plus the salient sentences the user said
// in the new messages (those with numbers, dates, mid-sentence capitalised
// names, or stated goals, preferences, limits and changes), verbatim, the
// oldest dropped first when over the requested size.
func Summary(input string) string {
	limit := 600
	if m := maxTokensRe.FindStringSubmatch(input); m != nil {
		limit, _ = strconv.Atoi(m[1])
	}
	prev, lines := splitSummaryInput(input)
	var kept []string
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			kept = append(kept, s)
		}
	}
	for _, s := range sentences(prev) {
		add(s)
	}
	var events []string
	for _, l := range lines {
		for _, s := range sentences(l) {
			if salient(s) {
				add(s)
				events = append(events, s)
			}
		}
	}
	// Rough size: four characters a token; stay under the limit.
	for len(kept) > 1 && len(strings.Join(kept, " "))/4 > limit {
		kept = kept[1:]
	}
	var r summaryReply
	r.Summary = strings.Join(kept, " ")
	if r.Summary == "" {
		r.Summary = "Small talk only; nothing specific to remember."
	}
	r.KeyEvents = nonNil(events)
	r.Preserved.Numbers = nonNil(numberRe.FindAllString(r.Summary, -1))
	r.Preserved.Dates = nonNil(dateRe.FindAllString(r.Summary, -1))
	r.Preserved.Decisions = []string{}
	for _, s := range kept {
		if decidedRe.MatchString(s) {
			r.Preserved.Decisions = append(r.Preserved.Decisions, s)
		}
	}
	b, _ := json.Marshal(r) // strings only: cannot fail
	return string(b)
}

// splitSummaryInput separates the previous summary from the new user
// messages in a summary request ("Previous summary: ... New messages:
// user: ..."). Without the markers every "user:" line counts as new.
func splitSummaryInput(input string) (prev string, userLines []string) {
	rest := input
	if i := strings.Index(rest, "Previous summary:"); i >= 0 {
		rest = rest[i+len("Previous summary:"):]
		if j := strings.Index(rest, "New messages:"); j >= 0 {
			prev, rest = rest[:j], rest[j:]
		} else {
			prev, rest = rest, ""
		}
	}
	for _, l := range strings.Split(rest, "\n") {
		l = strings.TrimSpace(l)
		if s, ok := strings.CutPrefix(l, "user:"); ok {
			userLines = append(userLines, strings.TrimSpace(s))
		}
	}
	return strings.TrimSpace(prev), userLines
}

// salient reports whether a sentence carries something worth keeping.
func salient(s string) bool {
	if strings.HasSuffix(s, "?") {
		return false
	}
	if numberRe.MatchString(s) || monthRe.MatchString(s) || statedRe.MatchString(s) {
		return true
	}
	return hasName(s)
}

// hasName reports whether a word after the first starts with a capital
// letter (other than the pronoun I).
func hasName(s string) bool {
	for i, w := range strings.Fields(s) {
		w = strings.TrimFunc(w, func(r rune) bool { return !unicode.IsLetter(r) })
		if i == 0 || w == "" || w == "I" || strings.HasPrefix(w, "I'") {
			continue
		}
		if unicode.IsUpper([]rune(w)[0]) {
			return true
		}
	}
	return false
}

// abbreviations never end a sentence.
var abbreviations = []string{"Dr.", "Mr.", "Mrs.", "Ms.", "Sr.", "Sra."}

// sentences splits text at '.', '!', '?' and line breaks, keeping numbers
// like "5.000" and titles like "Dr." whole.
func sentences(text string) []string {
	var out []string
	rs := []rune(text)
	start := 0
	flush := func(end int) {
		if s := strings.TrimSpace(string(rs[start:end])); s != "" {
			out = append(out, s)
		}
		start = end
	}
	for i, r := range rs {
		switch r {
		case '\n', '!', '?':
			flush(i + 1)
		case '.':
			if i+1 < len(rs) && unicode.IsDigit(rs[i+1]) && i > 0 && unicode.IsDigit(rs[i-1]) {
				continue
			}
			head := string(rs[start : i+1])
			abbr := false
			for _, a := range abbreviations {
				if strings.HasSuffix(head, " "+a) || head == a {
					abbr = true
				}
			}
			if !abbr {
				flush(i + 1)
			}
		}
	}
	flush(len(rs))
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// fact is one extracted fact in the reply.
type fact struct {
	Type       string  `json:"type"`
	Key        string  `json:"key"`
	Value      string  `json:"value"`
	Confidence float64 `json:"confidence"`
}

// factRule finds one kind of fact; key "" uses the normalised sentence.
type factRule struct {
	typ, key string
	re       *regexp.Regexp
	// group is the submatch holding the value; 0 keeps the whole sentence,
	// -1 takes the first non-empty group.
	group int
}

var factRules = []factRule{
	{"profile", "name", regexp.MustCompile(`(?:^|\s)(?:[Mm]y name is|I'm|I am|[Mm]e chamo|[Mm]eu nome é)\s+(\p{Lu}\p{Ll}+)\s*[.!]?$`), 1},
	{"profile", "city", regexp.MustCompile(`(?i)\b(?:i live in|i moved to|i've moved to|moro em|me mudei para|mudei para)\s+(\p{Lu}[\p{L}-]+)`), 1},
	{"profile", "diet", regexp.MustCompile(`(?i)\bi'?m (vegan|vegetarian|pescatarian)\b|\bsou (vegan[oa]|vegetarian[oa])\b`), -1},
	{"profile", "job", regexp.MustCompile(`(?i)\b(?:i work as an? |i'm an? (?:[\p{L} ]+) now|trabalho como )`), 0},
	{"profile", "car", regexp.MustCompile(`(?i)\b(?:i drive an? |new car, an? )`), 0},
	{"limit", "eating_out_budget", regexp.MustCompile(`(?i)\b(?:budget for eating out|eating-out budget|orçamento (?:para|de) restaurantes)\b`), 0},
	{"preference", "", regexp.MustCompile(`(?i)\b(?:i (?:always |really |usually )?(?:prefer|love)|i'd rather|prefiro|eu gosto de)\b`), 0},
	{"goal", "", regexp.MustCompile(`(?i)\b(?:i want to|my goal is|i'm planning to|i need to|quero|minha meta)\b`), 0},
	{"relationship", "", regexp.MustCompile(`(?i)\b(?:is called|named (?:him|her)|se chama|my landlord|lessons are with|meu médico|my sister)\b`), 0},
	{"event", "", regexp.MustCompile(`(?i)\b(?:appointment|interview|conference|vence em|aniversário)\b`), 0},
}

// firstPerson marks a statement about the speaker.
var firstPerson = regexp.MustCompile(`(?i)\b(?:i|i'm|i've|my|we|our|eu|meu|minha|meus|minhas|gastei|reduzi)\b`)

// Facts returns the stand-in extractor's JSON reply: {"facts": [...]} with
// the facts a few fixed English and Portuguese patterns find in the user's
// lines ("user: ..." lines when present, else all the input).
func Facts(input string) string {
	var lines []string
	for _, l := range strings.Split(input, "\n") {
		if s, ok := strings.CutPrefix(strings.TrimSpace(l), "user:"); ok {
			lines = append(lines, strings.TrimSpace(s))
		}
	}
	if len(lines) == 0 {
		lines = []string{input}
	}
	facts := []fact{}
	for _, l := range lines {
		for _, s := range sentences(l) {
			if strings.HasSuffix(s, "?") {
				continue
			}
			// Every keyed fact the sentence states, then, if none, the
			// first kind of unkeyed fact it matches.
			matched := false
			for _, keyed := range []bool{true, false} {
				for _, r := range factRules {
					if (r.key != "") != keyed || (!keyed && matched) {
						continue
					}
					m := r.re.FindStringSubmatch(s)
					if m == nil {
						continue
					}
					v := s
					switch {
					case r.group > 0:
						v = m[r.group]
					case r.group < 0:
						for _, g := range m[1:] {
							if g != "" {
								v = g
								break
							}
						}
					}
					key := r.key
					if key == "" {
						key = normalise(s)
					}
					facts = append(facts, fact{Type: r.typ, Key: key, Value: v, Confidence: 0.8})
					matched = true
				}
			}
			// Any other first-person statement carrying a specific (a
			// number, a date, a name) is a fact about the user, as a model
			// would report it.
			if !matched && firstPerson.MatchString(s) && (numberRe.MatchString(s) || monthRe.MatchString(s) || hasName(s)) {
				facts = append(facts, fact{Type: "profile", Key: normalise(s), Value: s, Confidence: 0.6})
			}
		}
	}
	b, _ := json.Marshal(map[string]any{"facts": facts})
	return string(b)
}

// normalise folds a sentence to a key: lower-case words joined by '_',
// at most eight.
func normalise(s string) string {
	words := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	if len(words) > 8 {
		words = words[:8]
	}
	return strings.Join(words, "_")
}
