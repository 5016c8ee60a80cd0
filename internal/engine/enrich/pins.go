package enrich

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/memgate/memgate/internal/memory"
)

// maxPinLen bounds the sentence kept as a fact's value, in bytes.
const maxPinLen = 300

// maxClauseLen bounds the clause the rules read, in bytes: a longer one is
// not a statement worth pinning, and the bound keeps the work per message
// linear.
const maxClauseLen = 400

// maxScanBytes bounds how much of one message the rules read (Detect, and
// the extractive summary's scoring), in bytes of whole sentences: the
// rules cost tens of microseconds a sentence, so a 2 MiB message of short
// sentences would cost seconds of enrichment. 16 KiB is several pages of
// chat; what a longer message says past it is still indexed for recall.
const maxScanBytes = 16 << 10

// Pin is a standing statement found in a user message, with the rule that
// found it.
type Pin struct {
	memory.Fact
	// Rule names the rule that matched ("diet", "goal", "preference"…).
	Rule string
}

// DetectPins returns the standing facts a user message states, one per
// clause that a rule accepts (see intent.go for the bar a pin must pass),
// in the message's first maxScanBytes of sentences.
// Only user messages carry pins. Profile facts get a key and a short value
// ("name: Marta", "city: Lisbon"), so a newer statement supersedes the
// older one; the others keep the user's sentence as the value, so amounts,
// dates and names survive verbatim, under a short key naming its topic.
func DetectPins(text string) []memory.Fact {
	pins := Detect(text)
	out := make([]memory.Fact, len(pins))
	for i, p := range pins {
		out[i] = p.Fact
	}
	return out
}

// Detect is DetectPins with the rule behind each pin.
func Detect(text string) []Pin {
	var out []Pin
	for _, s := range leadingSentences(text) {
		if strings.HasSuffix(s, "?") || len(s) > 4*maxClauseLen {
			continue // a question states nothing
		}
		clauses := splitClauses(s)
		scene := sceneRe.MatchString(fold(s))
		type hit struct {
			clause string
			r      *pinRule
			slot   string
			rest   string
		}
		var hits []hit
		for _, c := range clauses {
			if r, slot, rest, ok := classify(c); ok && !(scene && r.momentary) {
				hits = append(hits, hit{c, r, slot, rest})
			}
		}
		used := map[string]bool{}
		for _, h := range hits {
			key, value := h.r.key, ""
			if key != "" && h.slot != "" {
				value = h.slot
			} else {
				// The whole sentence when one clause of it matched, so
				// what the user added ("…, it tastes like soap") stays.
				value = s
				if len(hits) > 1 {
					value = h.clause
				}
			}
			if key == "" {
				key = topicKey(h.r.name, h.rest, h.clause)
			}
			value = memory.Truncate(strings.TrimSpace(value), maxPinLen)
			if value == "" || used[key] {
				continue
			}
			used[key] = true
			out = append(out, Pin{
				Fact: memory.Fact{Type: h.r.typ, Key: key, Value: value, Confidence: 0.6, Mentions: 1, Pinned: true},
				Rule: h.r.name,
			})
		}
	}
	return out
}

// clauseRe splits a sentence into clauses at commas, semicolons, dashes and
// coordinating conjunctions (English and Portuguese).
var clauseRe = regexp.MustCompile(`(?i)\s*(?:[,;:](?:\s+(?:and|but|so|e|mas|então|entao))?(?:\s|$)|\s[-–—]\s|\s(?:and|but|so|e|mas|então|entao|porque|because)\s)\s*`)

func splitClauses(s string) []string {
	var out []string
	for _, c := range clauseRe.Split(s, -1) {
		if c = strings.TrimSpace(c); c != "" && len(c) <= maxClauseLen {
			out = append(out, c)
		}
	}
	return out
}

// pinRule recognises one kind of standing statement.
type pinRule struct {
	name string
	typ  memory.FactType
	// key is the fact's key for profile facts a newer statement
	// supersedes ("city"); empty keys the fact by its topic.
	key string
	// re matches the folded clause; its end is where the rest begins. A
	// first submatch, when present, is the value's slot.
	re *regexp.Regexp
	// accept, when set, sees the rest of the clause after the match and
	// the whole folded clause, and says whether it is standing.
	accept func(rest, clause string) bool
	// slot, when set, extracts a short value from the rest.
	slot func(rest, orig string) string
	// momentary marks a taste or habit, which a scene of the moment
	// anywhere in the sentence ("…, it looks so cozy", "right now")
	// turns into a reaction to that moment.
	momentary bool
}

// classify returns the first rule that accepts the clause.
func classify(clause string) (*pinRule, string, string, bool) {
	f := fold(clause)
	for i := range pinRules {
		r := &pinRules[i]
		loc := r.re.FindStringSubmatchIndex(f)
		if loc == nil || !subjectPrefix(f[:loc[0]]) {
			continue
		}
		rest := strings.TrimSpace(f[loc[1]:])
		if r.accept != nil && !r.accept(rest, f) {
			continue
		}
		slot := ""
		switch {
		case r.slot != nil:
			if slot = r.slot(rest, clause); slot == "" && r.key != "" {
				continue // a keyed fact needs its value
			}
		case r.key != "":
			for g := 2; g+1 < len(loc); g += 2 {
				if loc[g] >= 0 {
					slot = f[loc[g]:loc[g+1]]
					break
				}
			}
		}
		return r, slot, rest, true
	}
	return nil, "", "", false
}

// otherSubjectRe: words before a match that make someone else the subject
// ("my sister says I love…", "if I want to…").
var otherSubjectRe = phrases(`my`, `his`, `her`, `their`, `your`, `he`, `she`, `they`, `says`, `said`, `thinks`, `think`, `if`, `when`, `whether`,
	`that`, `who`, `why`, `how`, `what`, `it`, `this`, `these`, `those`, `there`, `is`, `was`, `are`, `remind`, `reminds`, `reminded`, `makes`, `made`,
	`por que`, `porque`, `por isso`, `lembra`, `lembrou`, `isso`, `minha`, `meu`, `ele`, `ela`, `eles`, `elas`, `disse`, `diz`, `acha`, `se`, `quando`, `que`, `não sei`, `don't know`, `wonder`, `do you`)

// subjectPrefix reports whether what precedes a match leaves the user as
// its subject: a few filler or time words at most.
func subjectPrefix(p string) bool {
	p = strings.TrimSpace(thisTimeRe.ReplaceAllString(p, " "))
	if p == "" {
		return true
	}
	return len(strings.Fields(p)) <= 4 && !otherSubjectRe.MatchString(p)
}

// topicKey keys an unkeyed fact by its rule and the first content words of
// what it is about, after the words that matched ("goal: save r 5 000
// june"), never the whole sentence.
func topicKey(rule, rest, clause string) string {
	src := rest
	if NormalizeKey(src) == "" {
		src = clause
	}
	var words []string
	for _, w := range strings.Fields(NormalizeKey(src)) {
		if keyStopWords[w] {
			continue
		}
		words = append(words, w)
		if len(words) == 5 {
			break
		}
	}
	return memory.Truncate(rule+": "+strings.Join(words, " "), 80)
}

var keyStopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`i i'm im me my we our a an the to of in on at for by and or but so is am are be been it
		want need would like love really just do don t s m d ve ll not no eu meu minha o a os as um uma de do da dos das em no na
		para pra por que e é com se ao à quero preciso gostaria if when every todo toda`) {
		m[w] = true
	}
	return m
}()

// Slots.

// firstWords returns up to n words of rest, cut at a word that ends the
// slot ("since", "faz", "now"…) and at punctuation.
func firstWords(rest string, n int) string {
	var out []string
	for _, w := range strings.Fields(rest) {
		w = strings.TrimRight(w, ".!,;:")
		if w == "" || slotEnd[w] {
			break
		}
		out = append(out, w)
		if len(out) == n {
			break
		}
	}
	return strings.Join(out, " ")
}

var slotEnd = map[string]bool{
	"since": true, "for": true, "now": true, "with": true, "last": true, "next": true, "originally": true, "btw": true, "lol": true,
	"and": true, "but": true, "so": true, "because": true, "these": true, "nowadays": true, "mostly": true,
	"faz": true, "há": true, "desde": true, "agora": true, "com": true, "e": true, "mas": true, "então": true, "hoje": true, "atualmente": true,
}

// placeSlot keeps the place's words as the user wrote them (their case).
func placeSlot(rest, orig string) string {
	w := firstWords(rest, 3)
	if w == "" {
		return ""
	}
	if i := strings.Index(strings.ToLower(orig), w); i >= 0 {
		return orig[i : i+len(w)]
	}
	return w
}

// nameSlot takes the name as written: one or two capitalised words.
func nameSlot(rest, orig string) string {
	w := strings.Fields(rest)
	if len(w) == 0 {
		return ""
	}
	i := strings.Index(strings.ToLower(orig), w[0])
	if i < 0 {
		return ""
	}
	var out []string
	for _, tok := range strings.Fields(orig[i:]) {
		tok = strings.TrimRight(tok, ".!,;:")
		r, _ := utf8.DecodeRuneInString(tok)
		if tok == "" || !unicode.IsUpper(r) || len(out) == 2 {
			break
		}
		out = append(out, tok)
	}
	return strings.Join(out, " ")
}

// Accepts.

func all(fs ...func(rest, clause string) bool) func(rest, clause string) bool {
	return func(rest, clause string) bool {
		for _, f := range fs {
			if !f(rest, clause) {
				return false
			}
		}
		return true
	}
}

func notMoment(_, clause string) bool {
	return !momentRe.MatchString(clause) && !laughRe.MatchString(clause)
}

// laughRe marks banter ("I hate mondays lol"), not a stated taste.
var laughRe = regexp.MustCompile(`(?i)(?:^|\s)(?:lol|lmao|rofl|haha\w*|hehe\w*|kkk+|rsrs\w*|jaja\w*)(?:$|\s|[!.])`)

// oneOffRefusalRe: "decided not to go to the party" declines an event.
var oneOffRefusalRe = startsWith(`(?:not|não|nao) (?:to )?(?:go|ir|come|vir|attend|see|ver|watch|assistir|sair|eat|comer|buy|comprar|call|ligar|do it|fazer isso)`)

// namesSomething: the object is the user's own, not "it / that / the blue
// one / your idea" from the conversation.
func namesSomething(rest, _ string) bool {
	return !bareObject(rest) && !deicticRe.MatchString(rest) && !pronounRe.MatchString(rest)
}

// wantGoal accepts a weak "I want to / I need to / quero / preciso" as a
// goal: a goal verb follows, or no request does and a time frame is stated.
func wantGoal(rest, clause string) bool {
	rest = strings.TrimPrefix(strings.TrimPrefix(rest, "to "), "de ")
	switch {
	case goalVerbRe.MatchString(rest):
		return (!momentRe.MatchString(clause) || horizonRe.MatchString(clause)) && !pointsOutside(rest)
	case requestRe.MatchString(rest), thingRe.MatchString(rest), pointsOutside(rest):
		return false
	}
	return horizonRe.MatchString(clause)
}

func standingDecision(rest, clause string) bool {
	rest = strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(rest, "to "), "que "), "de ")
	return standingDecisionRe.MatchString(rest) && !oneOffRefusalRe.MatchString(rest) && !momentRe.MatchString(clause)
}

func choice(rest, clause string) bool {
	return rest != "" && !choiceDeicticRe.MatchString(rest) && !pronounRe.MatchString(rest) && !momentRe.MatchString(clause)
}

func standingReminder(rest, clause string) bool {
	return !remindQuestionRe.MatchString(rest) && !offerRe.MatchString(rest) && remindStandingRe.MatchString(rest) && !momentRe.MatchString(clause)
}

func aboutMoney(_, clause string) bool { return moneyLimitRe.MatchString(clause) }

// isName accepts "I'm Marta": one name, perhaps "here", and nothing else.
func isName(rest, clause string) bool {
	w := strings.Fields(rest)
	if len(w) == 0 || len(w) > 3 || notNames[strings.TrimRight(w[0], ".!,")] {
		return false
	}
	for _, x := range w[1:] {
		if x != "here" && x != "btw" && x != "aqui" {
			return false
		}
	}
	return true
}

var notNames = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`fine good ok okay here back home sorry glad sure tired done ready happy sad busy new in on at from
		american brazilian portuguese english british spanish french german italian canadian mexican indian chinese japanese korean
		christian catholic jewish muslim buddhist hindu vegan vegetarian eu bem aqui monday tuesday wednesday thursday friday
		saturday sunday january february march april may june july august september october november december`) {
		notNames[w] = true
	}
}

// hoursSlot is the job of "I work night shifts at the hospital": the
// hours with the place ("night shifts at the hospital"), which the
// place alone would lose.
func hoursSlot(rest, orig string) string {
	words := strings.Fields(orig)
	for i, w := range words {
		if !strings.EqualFold(w, "work") && !strings.EqualFold(w, "trabalho") {
			continue
		}
		place := firstWords(rest, 4)
		if place == "" {
			return ""
		}
		hours := words[i+1 : i+1+min(len(words)-i-1, 4)]
		for j, h := range hours {
			if hoursEnd[strings.ToLower(h)] {
				hours = hours[:j+1]
				break
			}
		}
		return strings.Join(hours, " ") + " " + place
	}
	return ""
}

// hoursEnd are the words that end a job's hours ("nights at").
var hoursEnd = map[string]bool{"at": true, "for": true, "in": true, "as": true, "num": true, "numa": true, "na": true, "no": true, "em": true, "como": true}

func jobSlot(rest, _ string) string {
	for _, a := range []string{"a ", "an ", "um ", "uma "} {
		rest = strings.TrimPrefix(rest, a)
	}
	return firstWords(rest, 4)
}

// The rules, first match wins. English clauses need the user as subject
// ("i", "i'm", "we decided"); Portuguese ones open with a first-person verb
// (moro, prefiro, sou, tenho…), which carries its subject.
var pinRules = []pinRule{
	{name: "name", typ: memory.FactProfile, key: "name", re: phrases(`my name is`, `my name's`, `meu nome é`, `me chamo`), slot: nameSlot},
	{name: "name", typ: memory.FactProfile, key: "name", re: phrases(`call me`), slot: nameSlot,
		accept: func(rest, _ string) bool {
			return !startsWith(`back`, `when`, `if`, `later`, `tomorrow`, `at`, `on`, `after`, `please`).MatchString(rest)
		}},
	{name: "name", typ: memory.FactProfile, key: "name", re: startsWith(`(?:hi |hey |oi |olá )?(?:i'm|i am|sou (?:a|o))`), slot: nameSlot,
		accept: func(rest, clause string) bool { return isName(rest, clause) && !strings.Contains(clause, " here now") }},
	{name: "city", typ: memory.FactProfile, key: "city", slot: placeSlot, re: phrases(`i live in`, `i'm living in`, `i am living in`, `i moved to`, `i've moved to`,
		`i have moved to`, `i'm moving to`, `i am moving to`, `i relocated to`, `we live in`, `we moved to`, `we're moving to`, `moramos em`, `vou me mudar para`, `vamos nos mudar para`, `nos mudamos para`, `moro em`, `moro no`, `moro na`, `eu moro em`, `me mudei para`, `mudei para`, `estou morando em`)},
	{name: "home", typ: memory.FactProfile, re: phrases(`i live (?:alone|with|by myself)`, `moro (?:sozinh[oa]|com)`)},
	{name: "origin", typ: memory.FactProfile, key: "from", slot: placeSlot, re: phrases(`i'm from`, `i am from`, `i come from`, `sou de`, `sou natural de`)},
	{name: "diet", typ: memory.FactProfile, key: "diet", re: phrases(
		`(?:i'm|i am|i've been|i have been) (?:a |now |fully |strictly )?(vegetarian|vegan|pescatarian|pescetarian|plant-based)`, `i keep (kosher|halal)`, `i (?:only )?eat (halal|kosher)(?: only)?`,
		`(?:sou|estou) (vegetarian[oa]|vegan[oa]|pescetarian[oa]|pescatarian[oa])`)},
	{name: "diet", typ: memory.FactLimit, re: phrases(`(?:i'm|i am) on a`), accept: func(rest, _ string) bool { return strings.Contains(rest, "diet") }},
	{name: "health", typ: memory.FactLimit, re: phrases(
		`(?:i'm|i am) (?:severely |very |super |really )?(?:gluten[- ]free|dairy[- ]free|allergic|intolerant|lactose intolerant|gluten intolerant|diabetic|pregnant|colou?rblind|colou?r blind|deaf|celiac|coeliac|epileptic|asthmatic|dyslexic|autistic|vegan)`,
		`i have (?:type \d )?(?:diabetes|asthma|celiac|coeliac|adhd|epilepsy|(?:a |an )?(?:\w+ )?allergy|high blood pressure|a bad back)`,
		`i have (?:a |two )?(?:bad|weak|dodgy|injured|bum|trick|chronic) (?:back|knees?|hips?|shoulders?|ankles?|neck|wrists?|heart|elbows?|feet|foot)`,
		`tenho (?:um |uma )?(?:problema|lesão|lesao|dor crônica|dor cronica) (?:no|na|nos|nas) (?:joelhos?|costas|coluna|quadril|ombros?|tornozelos?|pescoço|punhos?|coração)`,
		`i use a (?:wheelchair|cane|walker|hearing aid|screen reader)`, `(?:i'm|i am) (?:afraid|scared|terrified) of`,
		`(?:sou|estou) (?:muito )?(?:alérgic[oa]|alergic[oa]|intolerante|grávida|gravida|diabétic[oa]|daltônic[oa]|celíac[oa]|surd[oa])`,
		`tenho (?:diabetes|asma|doença celíaca|tdah|epilepsia|alergia|pressão alta|medo de|pavor de|fobia de)`,
		`my (?:son|daughter|kid|child|baby|kids|children|little one) (?:has|have|is|are) (?:a |an |severely )?(?:\w+ )?(?:allerg|intoleran)\w*`,
		`(?:meu filho|minha filha|meus filhos|meu bebê) (?:é|tem) (?:\w+ )?(?:alérgic|alergia|intolerân|intoleran)\w*`),
		accept: func(rest, clause string) bool { return !pronounRe.MatchString(rest) }},
	{name: "avoids", typ: memory.FactLimit, re: phrases(`(?:i don't|i do not|i never|i can't|i cannot|i won't) (?:eat|have|drink|touch|do|drive|fly|smoke)`,
		`não (?:como|bebo|posso comer|posso beber|dirijo|fumo|tomo|como mais)`), accept: all(notMoment, func(rest, clause string) bool {
		return !pronounRe.MatchString(rest) && !possessionRe.MatchString(clause)
	})},
	{name: "age", typ: memory.FactProfile, key: "age", re: regexp.MustCompile(`(?:^|\s)(?:i'm|i am|tenho) (\d{1,3})(?: years old| yo| anos(?: de idade)?)?\s*[.!]?$`)},
	{name: "job", typ: memory.FactProfile, key: "job", slot: jobSlot, re: phrases(`i work as`, `i'm working as`, `i am working as`, `i work at`, `i work for`,
		`i work in`, `i work from`, `my job is`, `i started working as`, `i started working at`, `trabalho como`, `trabalho na`, `trabalho no`,
		`trabalho em`, `trabalho numa`, `trabalho num`, `trabalho de`, `meu trabalho é`, `sou formad[oa] em`)},
	{name: "job", typ: memory.FactProfile, key: "job", slot: hoursSlot, re: phrases(
		`i work (?:nights|days|weekends|(?:night |day |early |late |double )?shifts|part-time|full-time|remotely) (?:at|for|in|as)`,
		`trabalho (?:à|de) (?:noite|dia) (?:num|numa|na|no|em|como)`)},
	{name: "job", typ: memory.FactProfile, key: "job", slot: jobSlot, re: phrases(`(?:i'm|i am) (?:a|an)`, `sou`),
		accept: func(rest, _ string) bool { return professions.MatchString(" " + firstWords(rest, 3)) }},
	{name: "family", typ: memory.FactProfile, re: phrases(
		`(?:i|we) have (?:a|an|one|two|three|four|five|\d+) (?:\w+ )?(?:kids?|children|sons?|daughters?|cats?|dogs?|grandchildren|grandkids|pets?|twins)`,
		`(?:i'm|i am) (?:a )?(?:single |stay-at-home |stay at home |working )?(?:mom|mum|mother|dad|father|parent|grandma|grandpa|grandmother|grandfather|widow|widower)`,
		`(?:i'm|i am) (?:married|divorced|engaged|retired|unemployed|self-employed|widowed)`,
		`(?:tenho|temos) (?:um|uma|dois|duas|três|tres|\d+) (?:\w+ )?(?:filh|gat|cachorr|cães|net|pet)\w*`,
		`sou (?:mãe|pai|avó|avô|viúv[oa]|casad[oa]|divorciad[oa]|solteir[oa]|aposentad[oa])`, `estou (?:casad|divorciad|aposentad|desempregad|noiv)\w*`),
		accept: notMoment},
	{name: "languages", typ: memory.FactProfile, re: phrases(`i speak`, `falo`), accept: func(rest, _ string) bool {
		return startsWith(`fluent`, `some`, `a little`, `a bit`, `english`, `portuguese`, `spanish`, `french`, `german`, `italian`, `japanese`,
			`mandarin`, `chinese`, `arabic`, `russian`, `hindi`, `korean`, `dutch`, `inglês`, `português`, `espanhol`, `francês`, `alemão`,
			`italiano`, `japonês`, `mandarim`, `árabe`, `russo`, `fluentemente`).MatchString(rest)
	}},
	{name: "availability", typ: memory.FactLimit, re: phrases(`i (?:only )?have (?:only )?(?:weekends|evenings|mornings|\w+days|nights)(?: free| off)?`,
		`(?:i'm|i am) only (?:free|available)`, `i only have`, `(?:só|so) tenho (?:os |as )?(?:fins? de semana|finais de semana|noites|manhãs|tardes|sábados|domingos)`,
		`(?:só|so) posso (?:aos|nos|de|à)`), accept: func(rest, clause string) bool {
		return strings.Contains(clause, "only") || strings.Contains(clause, "só") || strings.Contains(clause, "free") || strings.Contains(clause, "livre")
	}},
	{name: "reminder", typ: memory.FactGoal, re: phrases(`remind me`, `me avise`, `me avisa`, `me lembre`, `me lembra`, `avise-me`, `let me know (?:if|when|whenever)`, `alert me`, `warn me`),
		accept: standingReminder},
	{name: "limit", typ: memory.FactLimit, re: phrases(`i can't afford`, `i cannot afford`, `my (?:monthly |weekly |total )?budget (?:is|for)`, `my (?:monthly |weekly )?limit (?:is|for)`,
		`never more than`, `meu orçamento`, `meu limite`, `não posso gastar`), accept: func(rest, clause string) bool { return !pronounRe.MatchString(rest) }},
	{name: "limit", typ: memory.FactLimit, re: phrases(`no more than`, `no máximo`, `not more than`, `never spend more than`), accept: aboutMoney},
	{name: "goal", typ: memory.FactGoal, re: phrases(`my (?:main |big |new |\w+ )?(?:goal|aim|plan|dream|target|resolution)(?: for \w+| this year| for this year)? is`,
		`my (?:goal|aim) this year is`, `meu (?:grande )?(?:objetivo|sonho|plano)`, `minha (?:meta|resolução)`)},
	{name: "goal", typ: memory.FactGoal, re: phrases(`(?:i'm|i am) (?:saving|training|studying|preparing|working) (?:up )?(?:for|towards|toward)`, `(?:i'm|i am) saving up`,
		`estou (?:economizando|juntando|treinando|estudando|me preparando|guardando dinheiro)`), accept: func(rest, _ string) bool { return !pronounRe.MatchString(rest) }},
	{name: "learning", typ: memory.FactGoal, re: phrases(`(?:i'm|i am) learning`, `estou aprendendo`, `(?:i'm|i am) taking (?:\w+ )?(?:lessons|classes)`), accept: namesSomething},
	{name: "goal", typ: memory.FactGoal, re: phrases(`i plan to`, `i'm planning to`, `i am planning to`, `i'm trying to`, `i am trying to`, `i hope to`, `i'm hoping to`,
		`i am hoping to`, `i'm working towards`, `i intend to`, `pretendo`, `estou tentando`, `estou planejando`, `planejo`, `espero`), accept: wantGoal},
	{name: "goal", typ: memory.FactGoal, re: phrases(`i want to`, `i'd like to`, `i would like to`, `i'd love to`, `i would love to`, `i need to`, `i have to`,
		`i wish to`, `i really want to`, `eu quero`, `quero`, `eu preciso`, `preciso`, `gostaria de`, `queria`), accept: wantGoal},
	{name: "decision", typ: memory.FactDecision, re: phrases(`(?:i|we) (?:have |'ve |finally )?decided`, `i've decided`, `we've decided`, `i made the decision`, `(?:i|we) made up (?:my|our) minds?`,
		`decidi`, `decidimos`, `resolvi`, `resolvemos`), accept: standingDecision},
	{name: "decision", typ: memory.FactDecision, re: phrases(`i chose`, `i've chosen`, `i have chosen`, `i'm going with`, `i am going with`, `i went with`, `i opted for`,
		`escolhi`, `optei por`, `vou ficar com`, `fiquei com`), accept: choice},
	{name: "instruction", typ: memory.FactPreference, re: phrases(`please always`, `please never`, `(?:please )?keep (?:your |the |my )?(?:answers|replies|responses)`, `mantenha as respostas`, `always answer`, `always reply`, `never use`, `don't ever use`,
		`sempre responda`, `sempre me responda`, `nunca use`, `nunca me`)},
	{name: "preference", typ: memory.FactPreference, re: phrases(`i (?:always |really |usually |generally |much |definitely |strongly )?prefer`, `i'd (?:much )?rather`, `i would rather`,
		`(?:eu )?prefiro`), accept: all(notMoment, namesSomething), momentary: true},
	{name: "taste", typ: memory.FactPreference, re: phrases(
		`i (?:really |absolutely |just |totally |truly |do |kinda |kind of )?(?:love|like|enjoy|hate|dislike|adore|can't stand|cannot stand|don't like|do not like|don't enjoy|can't live without)`,
		`(?:eu )?(?:gosto (?:muito |demais |bastante )?de|não gosto (?:muito )?de|adoro|odeio|detesto|curto|amo)`), accept: all(notMoment, namesSomething), momentary: true},
	{name: "hobby", typ: memory.FactPreference, re: phrases(`i play`, `toco`, `jogo`), accept: func(rest, clause string) bool {
		return !momentRe.MatchString(clause) && startsWith(`(?:the )?(?:piano|guitar|violin|drums|bass|cello|flute|sax|saxophone|ukulele|trumpet)`,
			`tennis`, `soccer`, `football`, `basketball`, `volleyball`, `chess`, `golf`, `padel`, `baseball`, `hockey`,
			`piano`, `violão`, `guitarra`, `bateria`, `violino`, `baixo`, `flauta`, `tênis`, `tenis`, `futebol`, `vôlei`, `xadrez`, `basquete`).MatchString(rest)
	}},
	{name: "habit", typ: memory.FactPreference, re: regexp.MustCompile(`(?:^|\s)i (\w+)`), accept: habit, momentary: true},
	{name: "habit", typ: memory.FactPreference, re: regexp.MustCompile(`^(?:eu )?(?:sempre |nunca |só |so )?(\p{L}+o|vou)\s`), accept: habitPT, momentary: true},
	{name: "profile", typ: memory.FactProfile, re: phrases(`(?:i'm|i am) (?:a|an)`), accept: func(rest, clause string) bool {
		return !startsWith(`bit`, `little`, `lot`, `mess`, `wreck`, `mix`, `fan of (?:it|that|this|your|yours|them)`, `big fan of (?:it|that|this|your)`).MatchString(rest) &&
			!bareFanRe.MatchString(rest) &&
			!momentRe.MatchString(clause) && !pronounRe.MatchString(rest) && rest != ""
	}},
	{name: "profile", typ: memory.FactProfile, re: startsWith(`(?:eu )?sou`), accept: func(rest, _ string) bool {
		return rest != "" && !startsWith(`eu`, `grat[oa]`, `muito grat[oa]`, `fã d(?:isso|esse|essa|ele|ela)`, `a favor`, `contra`).MatchString(rest) &&
			!bareFanRe.MatchString(rest) && !pronounRe.MatchString(rest)
	}},
}

// notHabitVerbs are English words after "I" that never start a habit.
var notHabitVerbs = map[string]bool{
	"am": true, "was": true, "were": true, "had": true, "did": true, "will": true, "would": true, "could": true, "should": true,
	"might": true, "think": true, "guess": true, "hope": true, "said": true, "say": true, "mean": true, "know": true, "just": true,
	"can't": true, "cannot": true, "can": true, "feel": true, "felt": true, "went": true, "got": true, "saw": true, "told": true,
	"wonder": true, "believe": true, "see": true, "agree": true, "bet": true, "suppose": true, "wish": true, "thought": true,
	// Past tenses the "-ed" test misses: they tell what happened.
	"knew": true, "made": true, "took": true, "came": true, "found": true, "gave": true, "left": true, "met": true, "ran": true,
	"wrote": true, "ate": true, "drank": true, "bought": true, "brought": true, "began": true, "became": true, "kept": true,
	"sent": true, "spent": true, "lost": true, "won": true, "heard": true, "fell": true, "grew": true, "drove": true, "flew": true,
	"forgot": true, "sat": true, "stood": true, "wore": true, "dreamt": true,
}

// habit accepts "I <verb> … always / every Tuesday / three times a week".
func habit(rest, clause string) bool {
	i := strings.Index(clause, "i ")
	if i < 0 {
		return false
	}
	w := strings.Fields(clause[i+2:])
	if len(w) == 0 {
		return false
	}
	for len(w) > 1 && habitAdverbs[w[0]] {
		w = w[1:] // "i never knew": the verb is "knew"
	}
	v := w[0]
	if notHabitVerbs[v] || strings.HasSuffix(v, "ed") || strings.HasPrefix(v, "'") || perfect(w) {
		return false
	}
	return habitRe.MatchString(clause) && !momentRe.MatchString(clause) && !pronounRe.MatchString(rest)
}

// habitAdverbs stand between "I" and its verb ("I always cook").
var habitAdverbs = map[string]bool{
	"always": true, "never": true, "usually": true, "often": true, "normally": true, "only": true, "sometimes": true,
	"really": true, "also": true, "still": true, "generally": true, "rarely": true, "ever": true, "mostly": true,
}

// perfect reports "have (never) been / gone / tried…": what the user has
// or has not done so far, an experience rather than a habit.
func perfect(w []string) bool {
	if w[0] != "have" && w[0] != "has" && w[0] != "had" {
		return false
	}
	for _, x := range w[1:min(len(w), 4)] {
		if habitAdverbs[x] {
			continue
		}
		return strings.HasSuffix(x, "ed") || strings.HasSuffix(x, "en") || participles[x]
	}
	return false
}

var participles = map[string]bool{
	"been": true, "gone": true, "done": true, "seen": true, "had": true, "met": true, "made": true, "read": true, "heard": true,
	"felt": true, "found": true, "got": true, "gotten": true, "known": true, "thought": true, "won": true, "lost": true, "run": true,
}

// habitPT accepts a Portuguese first-person verb with a habit ("faço
// musculação três vezes por semana", "só compro roupa usada").
func habitPT(rest, clause string) bool {
	verb := strings.TrimPrefix(clause, "eu ")
	for _, a := range []string{"sempre ", "nunca ", "só ", "so "} {
		verb = strings.TrimPrefix(verb, a)
	}
	return habitRe.MatchString(clause) && !momentRe.MatchString(clause) && !pronounRe.MatchString(rest) &&
		!startsWith(`não sei`, `acho`, `tenho que`, `fico`, `fui`, `estive`).MatchString(verb)
}

// Sentences splits text into trimmed sentences at '.', '!', '?' and line
// breaks, without splitting numbers such as "5.000" or "3.5". A line break
// is any character memory.IsBreak names — "\r", NEL, the separators,
// every control but the tab — and no sentence keeps one, so no value
// taken from a sentence runs on into the next line.
func Sentences(text string) []string { return sentences(text, -1) }

// leadingSentences returns the leading sentences of text (as Sentences
// splits it) whose bytes together stay within maxScanBytes, reading no
// further: what the rules read of a message costs no more for a longer
// one.
func leadingSentences(text string) []string { return sentences(text, maxScanBytes) }

// sentences is Sentences, stopping before the first sentence that would
// take the bytes of those found past limit (limit < 0: no limit). A
// sentence is a slice of text, copied only when it holds invalid UTF-8
// (each such byte read as U+FFFD).
func sentences(text string, limit int) []string {
	var out []string
	start, n := 0, 0
	full := false
	flush := func(end int) {
		s := strings.TrimSpace(text[start:end])
		start = end
		if s == "" || full {
			return
		}
		if !utf8.ValidString(s) {
			s = string([]rune(s))
		}
		if n += len(s); limit >= 0 && n > limit {
			full = true
			return
		}
		out = append(out, s)
	}
	prev := rune(-1)
	for i, r := range text {
		if full {
			break
		}
		switch {
		case memory.IsBreak(r):
			flush(i)
			start = i + utf8.RuneLen(r) // a break is a valid rune
		case r == '!', r == '?':
			flush(i + 1)
		case r == '.':
			if next, _ := utf8.DecodeRuneInString(text[i+1:]); prev >= 0 && i+1 < len(text) && unicode.IsDigit(prev) && unicode.IsDigit(next) {
				break
			}
			flush(i + 1)
		}
		prev = r
	}
	flush(len(text))
	return out
}

// NormalizeKey folds a statement to a key: foldWords, at most 80 bytes.
func NormalizeKey(s string) string { return memory.Truncate(foldWords(s), 80) }

// foldWords is s in lower case, its letters and digits only, words one
// space apart: what two spellings of one statement share.
func foldWords(s string) string {
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
	return b.String()
}
