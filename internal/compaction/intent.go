package compaction

import (
	"regexp"
	"strings"

	"github.com/memgate/memgate/internal/memory"
)

// A pin needs a standing intent: something true of the user, or wanted by
// them, beyond the current request. "I want to save R$ 5.000 by June" is a
// goal; "I want to know the capital of Peru", "I need to convert 5 miles to
// km" and "I'd like a recipe" are requests that end with their answer. The
// rules below tell them apart by what follows the verb of wanting: an
// information or task verb ("know", "convert", "saber", "converter") or the
// assistant ("I want you to") makes a request; a verb of self-improvement,
// saving, quitting, learning or travelling ("save", "quit", "aprender"), or
// a standing time frame ("by June", "this year", "every Sunday", "até o fim
// do ano"), makes a goal. Everything else a "want / need" says stays out.

// pinRule recognises one kind of statement. When key is empty the fact's key
// is its normalised sentence, so each distinct goal or decision is its own
// fact; a fixed key ("city") makes a newer statement supersede an older one.
// accept, when set, sees the rest of the sentence after a match (lower
// case) and the whole sentence, and says whether that match states a
// standing intent.
type pinRule struct {
	typ    memory.FactType
	key    string
	re     *regexp.Regexp
	accept func(rest, sentence string) bool
}

// match reports whether any match of the rule in s is accepted.
func (r pinRule) match(s string) bool {
	for _, loc := range r.re.FindAllStringIndex(s, -1) {
		if r.accept == nil || r.accept(strings.ToLower(strings.TrimSpace(s[loc[1]:])), strings.ToLower(s)) {
			return true
		}
	}
	return false
}

// phrases compiles alternatives that match case-insensitively as whole
// words. Go's \b knows only ASCII letters, so the boundaries are spelled
// out: "meu nome é" must end at the "é".
func phrases(alts ...string) *regexp.Regexp {
	return regexp.MustCompile(`(?i)(?:^|[^\p{L}\p{N}_'’])(?:` + strings.Join(alts, "|") + `)(?:$|[^\p{L}\p{N}_])`)
}

// startsWith compiles alternatives matched, case-insensitively, as whole
// words at the start of a text.
func startsWith(alts ...string) *regexp.Regexp {
	return regexp.MustCompile(`(?i)^(?:` + strings.Join(alts, "|") + `)(?:$|[^\p{L}\p{N}_])`)
}

var (
	// requestRe: what follows "I want to / I need to / quero / preciso"
	// in a one-off request — information, a calculation, a piece of
	// writing, or something from the assistant.
	requestRe = startsWith(
		`you`, `u`, `que (?:você|voce|vc|tu)`, `help`, `ajuda`,
		`know`, `see`, `ask`, `check`, `convert`, `calculate`, `compute`, `translate`, `find`, `figure`, `understand`,
		`compare`, `hear`, `read about`, `read more`, `look`, `order`, `book`, `try`, `make`, `cook`, `watch`, `write`,
		`learn (?:about|more|what|how|why|if|whether)`, `get (?:a|an|the|some|this|that|my|it)`, `tell`, `say`, `talk`,
		`saber`, `ver`, `perguntar`, `conferir`, `verificar`, `checar`, `converter`, `calcular`, `traduzir`, `descobrir`,
		`entender`, `achar`, `encontrar`, `procurar`, `ouvir`, `pedir`, `fazer`, `escrever`, `comprar (?:pão|leite|um presente)`,
	)
	// thingRe: a thing wanted rather than an aim ("quero uma receita",
	// "preciso de ajuda").
	thingRe = startsWith(`de`, `do`, `da`, `um`, `uma`, `a`, `an`, `the`, `some`, `o`, `os`, `as`)
	// goalVerbRe: what follows "I want to / quero" in a goal.
	goalVerbRe = startsWith(
		`save (?:up|money|more|for|\$|€|£|r\$|\d)`, `lose (?:weight|\d|some|a few)`, `gain (?:muscle|\d)`,
		`run (?:a |an |the |my first|\d|every|more|\w*marathon)`, `learn`, `quit`, `stop \w+ing`, `start (?:\w+ing|my own|a business)`,
		`become`, `pay (?:off|down|back)`, `move (?:to|abroad|out|house)`, `visit every`, `travel`, `retire`, `reach`,
		`get (?:fit|in shape|better at|healthier|promoted|a promotion|married|my (?:degree|licen[cs]e|driving))`,
		`improve`, `exercise`, `cut (?:down|back)`, `reduce`, `eat (?:less|more|healthier|healthy|better)`, `drink (?:less|more)`,
		`sleep (?:more|better|earlier|before)`, `spend less`, `invest`, `climb`, `master`, `be (?:debt-free|fluent|able to)`,
		`go (?:vegan|vegetarian|freelance|back to)`, `meditate`, `write a (?:book|novel)`, `(?:change|switch) careers`,
		`economizar`, `juntar`, `poupar`, `guardar dinheiro`, `perder (?:peso|\d|uns)`, `emagrecer`, `aprender`,
		`correr (?:uma|a|\d|todo|mais)`, `viajar`, `conhecer`, `mudar (?:para|de cidade|de carreira|de emprego)`, `me mudar`,
		`quitar`, `parar de`, `deixar de`, `largar`, `começar a`, `treinar`, `investir`, `me aposentar`, `aposentar`,
		`melhorar`, `reduzir`, `cortar`, `beber menos`, `comer (?:menos|melhor)`, `dormir (?:mais|melhor|cedo)`,
		`ficar em forma`, `ser fluente`, `tirar (?:a carteira|o mestrado|a habilitação)`,
	)
	// horizonRe: a standing time frame.
	horizonRe = phrases(
		`by (?:the end|next|january|february|march|april|may|june|july|august|september|october|november|december|summer|winter|spring|autumn|fall|christmas|\d{2,4})`,
		`this year`, `next year`, `in the next (?:\w+ )?(?:years?|months)`, `within (?:a|the|\w+) (?:years?|months)`,
		`one day`, `someday`, `some day`, `eventually`, `in the long run`, `for good`,
		`every (?:day|week|month|year|morning|night|evening|weekend|monday|tuesday|wednesday|thursday|friday|saturday|sunday)`,
		`each (?:day|week|month|year)`, `(?:a|per) (?:day|week|month|year)`,
		`até (?:o fim|o final|janeiro|fevereiro|março|abril|maio|junho|julho|agosto|setembro|outubro|novembro|dezembro|o verão|o natal|\d{4})`,
		`este ano`, `esse ano`, `neste ano`, `ano que vem`, `no próximo ano`, `nos próximos`, `um dia`, `algum dia`,
		`todo (?:dia|mês|mes|ano)`, `todos os (?:dias|meses|anos)`, `toda (?:semana|segunda|terça|quarta|quinta|sexta)`,
		`por (?:dia|semana|mês|mes|ano)`,
	)
	// reactionRe: what follows "I like / I love / adoro" in a reaction
	// to the last answer rather than a taste.
	reactionRe = startsWith(`it`, `it's`, `that`, `this`, `these`, `those`, `your`, `yours`, `them`, `when (?:that|this|it|you)`,
		`isso`, `isto`, `essa`, `esse`, `esta`, `este`, `sua`, `seu`)
	// remindQuestionRe: "remind me what / me lembra como" asks a question.
	remindQuestionRe = startsWith(`what`, `how`, `who`, `where`, `which`, `why`, `o que`, `como`, `quem`, `onde`, `qual`, `quais`, `por que`)
	// spendRe: a "no more than" about money is a limit; about the answer's
	// length it is a one-off instruction.
	spendRe = phrases(`spend`, `spending`, `pay`, `budget`, `gastar`, `gasto`, `pagar`, `orçamento`)
)

// wantGoal accepts a weak "I want to / I need to / quero / preciso" as a
// goal: a goal verb follows, or no request does and a time frame is stated.
func wantGoal(rest, sentence string) bool {
	rest = strings.TrimPrefix(rest, "to ")
	switch {
	case goalVerbRe.MatchString(rest):
		return true
	case requestRe.MatchString(rest), thingRe.MatchString(rest):
		return false
	}
	return horizonRe.MatchString(sentence)
}

// plannedGoal accepts a stated plan or aim unless it is a request.
func plannedGoal(rest, _ string) bool { return !requestRe.MatchString(strings.TrimPrefix(rest, "to ")) }

// notReaction rejects a "like / love" that reacts to the last answer.
func notReaction(rest, _ string) bool { return !reactionRe.MatchString(rest) }

// notQuestion rejects "remind me what ...".
func notQuestion(rest, _ string) bool { return !remindQuestionRe.MatchString(rest) }

// spending accepts a "no more than" about money.
func spending(_, sentence string) bool { return spendRe.MatchString(sentence) }

// notCallBack rejects "call me back / later".
func notCallBack(rest, _ string) bool {
	return !startsWith(`back`, `when`, `if`, `later`, `tomorrow`, `at`, `on`, `after`).MatchString(rest)
}

// pinRules are the English and Portuguese statements worth pinning.
var pinRules = []pinRule{
	// Where the user lives: a newer statement supersedes the older one.
	{typ: memory.FactProfile, key: "city", re: phrases(`i live in`, `i'm living in`, `i am living in`, `i moved to`, `i've moved to`, `i have moved to`, `i'm moving to`, `moro em`, `eu moro em`, `me mudei para`, `mudei-me para`, `estou morando em`)},
	{typ: memory.FactProfile, key: "name", re: phrases(`my name is`, `meu nome é`, `me chamo`)},
	{typ: memory.FactProfile, key: "name", re: phrases(`call me`), accept: notCallBack},
	{typ: memory.FactProfile, key: "diet", re: phrases(`i'm (?:a )?(?:vegetarian|vegan|pescatarian|pescetarian)`, `i am (?:a )?(?:vegetarian|vegan|pescatarian|pescetarian)`, `i don't eat meat`, `i do not eat meat`, `sou (?:vegetarian|vegan|pescetarian|pescatarian)[oa]`, `não como carne`)},
	{typ: memory.FactProfile, key: "job", re: phrases(`i work as`, `i'm working as`, `i am working as`, `i work at`, `i work for`, `my job is`, `my new job is`, `i started working as`, `i started working at`, `trabalho como`, `trabalho na`, `trabalho no`, `trabalho em`, `meu trabalho é`)},
	{typ: memory.FactLimit, re: phrases(`i'm allergic to`, `i am allergic to`, `i can't eat`, `i cannot eat`, `i can't afford`, `my budget is`, `my budget for`, `my limit is`, `never more than`, `sou alérgic[oa] a`, `não posso comer`, `meu orçamento é`, `meu orçamento para`, `meu limite é`, `meu limite de`)},
	{typ: memory.FactLimit, re: phrases(`no more than`, `no máximo`), accept: spending},
	{typ: memory.FactGoal, re: phrases(`my goal is`, `my aim is`, `i plan to`, `i'm planning to`, `i am planning to`, `i'm trying to`, `i am trying to`, `i hope to`, `i'm hoping to`, `i'm saving for`, `i'm saving up`, `i am saving for`, `i'm working towards`,
		`meu objetivo é`, `minha meta é`, `pretendo`, `estou tentando`, `estou economizando`, `estou juntando`), accept: plannedGoal},
	{typ: memory.FactGoal, re: phrases(`i want to`, `i wanna`, `i'd like to`, `i would like to`, `i'd love to`, `i would love to`, `i need to`, `i have to`, `eu quero`, `quero`, `eu preciso`, `preciso`, `gostaria de`, `queria`), accept: wantGoal},
	{typ: memory.FactGoal, re: phrases(`remind me`, `me lembre`, `me lembra`, `me avise`, `me avisa`), accept: notQuestion},
	{typ: memory.FactPreference, re: phrases(`i (?:always |really |usually |generally |much )?prefer`, `i'd rather`, `i would rather`, `i (?:really )?like`, `i (?:really )?love`, `i hate`, `i don't like`, `i do not like`, `i dislike`, `i can't stand`,
		`prefiro`, `eu gosto de`, `gosto de`, `não gosto de`, `odeio`, `adoro`, `detesto`), accept: notReaction},
	{typ: memory.FactPreference, re: phrases(`please always`, `please never`, `always answer`, `never use`, `sempre responda`, `nunca use`)},
	{typ: memory.FactDecision, re: phrases(`i decided`, `i've decided`, `i have decided`, `i'm going with`, `i chose`, `i've chosen`, `we decided`, `we've decided`, `decidi`, `decidimos`, `vou ficar com`, `escolhi`)},
}
