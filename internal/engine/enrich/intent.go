package enrich

import (
	"regexp"
	"strings"
)

// What makes a pin. A pin is paid for in every later prompt of the user, so
// it must be standing: a goal, limit, preference, decision or fact about the
// user that stays true beyond the moment, stated by the user about
// themself, with its referent in the sentence itself ("I'm vegetarian",
// "Prefiro investir em renda fixa", "I want to save R$ 5.000 by June").
// Not pins: momentary states ("I'm outside right now"), events ("we decided
// to take a walk"), opinions about "it / them / that" ("I love listening to
// them"), things said about someone else ("my sister loves sushi"),
// reactions and one-off requests ("I want to know the capital of Peru").
// What misses the bar is still stored and recalled when relevant.
//
// The rules work on one clause at a time, in lower case with chat
// spellings folded (see fold): a clause must open with the user as
// subject, then say something standing. Each rule names itself, so the
// inspector can say why a fact was pinned.

// phrases compiles alternatives that match case-insensitively as whole
// words anywhere. Go's \b knows only ASCII letters, so the boundaries are
// spelled out: "meu nome é" must end at the "é".
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
	// in a one-off request: information, a calculation, a piece of
	// writing, or something from the assistant.
	requestRe = startsWith(
		`you`, `u`, `que (?:você|voce|vc|tu)`, `te`, `help`, `ajuda`,
		`know`, `see`, `ask`, `check`, `convert`, `calculate`, `compute`, `translate`, `find`, `figure`, `understand`,
		`compare`, `hear`, `read about`, `read more`, `look`, `order`, `book`, `try`, `make`, `cook`, `watch`, `write`, `pick`, `think`,
		`learn (?:about|more|what|how|why|if|whether)`, `get (?:a|an|the|some|this|that|my|it)`, `tell`, `say`, `talk`, `go now`, `go`, `leave`,
		`saber`, `ver`, `perguntar`, `conferir`, `verificar`, `checar`, `converter`, `calcular`, `traduzir`, `descobrir`,
		`entender`, `achar`, `encontrar`, `procurar`, `ouvir`, `pedir`, `fazer`, `escrever`, `pensar`, `ir`, `sair`, `comprar (?:pão|leite|um presente)`,
	)
	// thingRe: a thing wanted rather than an aim ("quero uma receita",
	// "preciso de ajuda").
	thingRe = startsWith(`de`, `do`, `da`, `um`, `uma`, `a`, `an`, `the`, `some`, `o`, `os`, `as`)
	// goalVerbRe: what follows "I want to / quero" in a goal.
	goalVerbRe = startsWith(
		`save (?:up|money|more|for|\$|€|£|r\$|\d)`, `lose (?:weight|\d|some|a few)`, `gain (?:muscle|\d)`,
		`run (?:a |an |the |my first|\d|every|more|\w*marathon)`, `learn`, `quit`, `stop \w+ing`, `start (?:\w+ing|my own|a business)`,
		`become`, `pay (?:off|down|back)`, `move (?:to|abroad|out|house)`, `visit (?:every|all)`, `see (?:every|all) (?:\d+ )?(?:continents|countries|states)`, `travel`, `retire`, `reach`,
		`get (?:fit|in shape|better at|healthier|promoted|a promotion|married|my (?:degree|licen[cs]e|driving))`,
		`improve`, `exercise`, `cut (?:down|back)`, `reduce`, `eat (?:less|more|healthier|healthy|better)`, `drink (?:less|more)`,
		`sleep (?:more|better|earlier|before)`, `spend less`, `invest`, `climb`, `master`, `be (?:debt-free|debt free|fluent|able to)`,
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
		`before (?:the|my|next|\d{4}|january|february|march|april|may|june|july|august|september|october|november|december|summer|winter|spring|autumn|fall|christmas)`,
		`this year`, `next (?:year|spring|summer|autumn|fall|winter|semester)`, `in (?:january|february|march|april|may|june|july|august|september|october|november|december|the spring|the summer|the fall|the autumn|the winter)`, `in the next (?:\w+ )?(?:years?|months)`, `within (?:a|the|\w+) (?:years?|months)`,
		`one day`, `someday`, `some day`, `eventually`, `in the long run`, `for good`,
		`every (?:day|week|month|year|morning|night|evening|weekend|monday|tuesday|wednesday|thursday|friday|saturday|sunday)`,
		`each (?:day|week|month|year)`, `(?:a|per) (?:day|week|month|year)`,
		`até (?:o fim|o final|janeiro|fevereiro|março|abril|maio|junho|julho|agosto|setembro|outubro|novembro|dezembro|o verão|o natal|\d{4})`,
		`este ano`, `esse ano`, `neste ano`, `ano que vem`, `no próximo ano`, `nos próximos`, `um dia`, `algum dia`,
		`todo (?:dia|mês|mes|ano)`, `todos os (?:dias|meses|anos)`, `toda (?:semana|segunda|terça|quarta|quinta|sexta)`,
		`por (?:dia|semana|mês|mes|ano)`,
	)
	// momentRe: the clause is about this moment or a past or coming event,
	// not a standing state.
	momentRe = phrases(
		`now`, `right now`, `rn`, `today`, `tonight`, `this (?:morning|afternoon|evening|weekend)`, `yesterday`,
		`last (?:night|week|weekend|month|year|summer|winter|spring|fall|autumn|time)`, `as a kid`, `ago`,
		`semana passada`, `mês passado`, `ano passado`, `quando (?:eu )?era (?:criança|pequen[oa])`,
		`tomorrow`, `at the moment`, `just`, `real quick`,
		`agora`, `hoje`, `ontem`, `amanhã`, `amanha`, `neste momento`, `nesse momento`, `esta noite`, `essa noite`, `hoje à noite`, `rapidinho`,
	)
	// deicticRe: an object that points at something in the conversation
	// ("it", "that", "the blue one", "your idea", "how you said it")
	// rather than naming what the user likes.
	deicticRe = startsWith(
		`it`, `it's`, `its`, `that`, `this`, `these`, `those`, `them`, `they`, `you`, `your`, `yours`, `how`, `when`, `what`, `the`,
		`his`, `her`, `their`, `our`, `a lot about`, `him`, `spending time with`,
		`isso`, `isto`, `esse`, `essa`, `este`, `esta`, `aquele`, `aquela`, `eles`, `elas`, `você`, `vc`, `vocês`, `sua`, `seu`,
		`quando`, `como`, `o`, `a`, `os`, `as`, `do`, `da`, `dos`, `das`, `disso`, `desse`, `dessa`, `dele`, `dela`, `te`,
		// "doing something I love is awesome": a verb after "I love" shows
		// a relative clause, whose object is outside it.
		`is`, `are`, `was`, `were`, `makes`, `made`, `é`, `são`, `foi`, `era`, `faz`,
		// "all the lights", "todas essas luzinhas": the things in view.
		`all (?:the|these|those|this|that|of)`, `everything (?:about|here|in)`,
		`tod[oa]s? (?:[oa]s?|ess[ea]s?|est[ea]s?|aquel[ea]s?|iss[oa])`, `tudo (?:isso|nesse|nessa|neste|nesta|aqui|daqui|sobre|no|na|em)`,
	)
	// pronounRe: a pronoun anywhere in the object points back at the
	// conversation ("listening to them", "sunsets like this").
	// A person or place pronoun ("making him laugh", "I go there") is as
	// empty as "it": its referent is outside the sentence.
	pronounRe = phrases(`it`, `them`, `this`, `that`, `these`, `those`, `eles`, `elas`, `isso`, `isto`, `esse`, `essa`, `you`, `vocês`,
		`him`, `there`, `ele`, `ela`, `lá`, `ali`, `aí`, `aquele`, `aquela`, `aqueles`, `aquelas`, `aquilo`,
		// "a fan of your work": the other person's, not the user's.
		`your`, `seu`, `sua`, `teu`, `tua`)
	// choiceDeicticRe: a choice among what the assistant listed.
	choiceDeicticRe = phrases(`first`, `second`, `third`, `last one`, `other one`, `one`, `option`, `opção`, `primeir[oa]`, `segund[oa]`, `terceir[oa]`, `outr[oa]`, `it`, `that`, `this`, `isso`, `esse`, `essa`)
	// standingDecisionRe: what follows "I decided to / decidi" in a
	// decision that changes how the user lives, works or spends, as
	// opposed to what they did that day.
	standingDecisionRe = startsWith(
		`not`, `never`, `no longer`, `stop`, `quit`, `cancel`, `move`, `sell`, `buy (?:a|an|our|my) (?:house|home|car|flat|apartment)`, `go (?:freelance|vegan|vegetarian|back to|part-time|full-time)`,
		`homeschool`, `switch`, `change (?:jobs|careers|my)`, `leave (?:my|the) (?:job|company|firm)`, `rent`, `get (?:married|divorced|a dog|a cat)`,
		`retire`, `keep`, `study`, `learn`, `become`, `join`, `enroll`, `adopt`, `invest`, `save`, `pay off`, `give up`, `cut`,
		`não`, `nunca`, `parar`, `cancelar`, `mudar`, `me mudar`, `vender`, `comprar (?:uma|um|a|o) (?:casa|carro|apartamento)`, `largar`, `sair do (?:emprego|trabalho)`,
		`adotar`, `investir`, `estudar`, `virar`, `me tornar`, `aprender`, `voltar a estudar`, `trancar`, `economizar`, `juntar`, `quitar`, `deixar de`, `trocar de (?:emprego|carreira|área)`,
	)
	// remindStandingRe: a reminder that stands ("remind me if…", "every
	// Sunday", "me avise se…"), not one about today.
	remindStandingRe = phrases(`if`, `when`, `whenever`, `every`, `each`, `before`, `se`, `quando`, `sempre`, `todo`, `toda`, `todos`, `todas`, `antes`)
	// offerRe: "let me know if you need anything", "me avisa se precisar"
	// offers help to the other person; it asks nothing standing of the
	// assistant.
	offerRe = startsWith(`(?:(?:if|when|whenever|se|quando) )?(?:you|u|ya|você|vc|tu|precisar|quiser|puder)`, `(?:if|se) (?:there's|tem) anything`)
	// possessionRe: "I don't have a recipe / any plans" says what the user
	// lacks, not what they avoid.
	possessionRe = phrases(`(?:don't|do not|never|can't|cannot|won't) have (?:a|an|any|the|much|many|big|enough|time|plans|my|your|no)`)
	// sceneRe: the sentence describes the scene in front of the user ("it
	// looks so cozy", "tá lindo", "right now"), so a taste stated in it is a
	// reaction to the moment.
	sceneRe = phrases(`it looks`, `it's looking`, `looks? so`, `so (?:cozy|pretty|beautiful|gorgeous|lovely|cute)`, `right now`, `rn`,
		`at the moment`, `(?:está|esta|tá|ta|ficou|que) (?:muito |tão |tao )?lind[oa]`, `neste momento`, `nesse momento`, `agora`)
	// bareFanRe: "I'm a huge fan (too)", "sou muito fã": a fan of what the
	// other person said.
	bareFanRe = regexp.MustCompile(`^(?:(?:a|an|um|uma|big|huge|total|massive|real|true|muito|grande|super) )*(?:fan|fã)(?:\s+(?:too|also|as well|tb|também|tbm))?\s*[.!]*$`)
	// thisTimeRe: "this year", "esse ano" point at a time, not at
	// something in the conversation; subjectPrefix and pointsOutside drop
	// them first.
	thisTimeRe = phrases(`(?:this|that) (?:year|month|week|summer|winter|spring|fall|autumn|semester|time)`, `these days`,
		`(?:esse|este|neste|nesse) (?:ano|mês|mes|semestre|verão|inverno)`, `(?:essa|esta|nesta|nessa) semana`)
	// remindQuestionRe: "remind me what / me lembra como" asks a question.
	remindQuestionRe = startsWith(`what`, `how`, `who`, `where`, `which`, `why`, `o que`, `como`, `quem`, `onde`, `qual`, `quais`, `por que`)
	// moneyLimitRe: a "no more than" about money is a limit; about the
	// answer's length it is a one-off instruction.
	moneyLimitRe = phrases(`spend`, `spending`, `pay`, `budget`, `gastar`, `gasto`, `pagar`, `orçamento`, `\$`, `€`, `£`, `r\$`, `euros?`, `dollars?`, `reais`, `bucks`)
	// habitRe: a standing habit ("always", "every Tuesday", "three times
	// a week", "todo dia").
	habitRe = phrases(
		`always`, `usually`, `never`, `normally`, `often`, `only`,
		`every (?:day|morning|night|evening|week|weekend|month|monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekday)`,
		`each (?:day|week|month)`, `on weekends`, `(?:\d+|once|twice|two|three|four|five) times? a (?:day|week|month)`,
		`sempre`, `nunca`, `só`, `todo (?:dia|mês|mes|domingo|sábado)`, `toda (?:semana|manhã|noite|segunda|terça|quarta|quinta|sexta)`, `todos os dias`,
		`(?:\d+|uma|duas|três|tres|quatro|cinco) vez(?:es)? por (?:dia|semana|mês|mes)`, `aos (?:sábados|domingos|fins de semana)`,
	)
)

// pointsOutside reports a pronoun in the object whose referent is outside
// the sentence ("try them someday"), time words aside ("this year").
func pointsOutside(rest string) bool {
	return pronounRe.MatchString(thisTimeRe.ReplaceAllString(rest, " "))
}

// echoWords add nothing to an object: "I love to", "I love it too", "adoro
// demais".
var echoWords = map[string]bool{
	"to": true, "too": true, "also": true, "so": true, "much": true, "a": true, "lot": true, "as": true, "well": true,
	"também": true, "tb": true, "demais": true, "muito": true, "mesmo": true, "sim": true,
}

// bareObject reports an object with nothing of its own ("I love to!!",
// "yeah I love too"): its referent is what the other person said.
func bareObject(rest string) bool {
	for _, w := range strings.Fields(rest) {
		if w = strings.Trim(w, ".!,;:?"); w != "" && !echoWords[w] {
			return false
		}
	}
	return true
}

// professions are nouns that make "I'm a …" / "sou …" a job.
var professions = phrases(
	`nurse`, `teacher`, `doctor`, `engineer`, `developer`, `programmer`, `designer`, `lawyer`, `accountant`, `student`, `chef`, `cook`,
	`waiter`, `waitress`, `driver`, `manager`, `consultant`, `architect`, `dentist`, `pharmacist`, `scientist`, `researcher`, `writer`,
	`journalist`, `photographer`, `artist`, `musician`, `electrician`, `plumber`, `mechanic`, `farmer`, `firefighter`, `police officer`,
	`cop`, `pilot`, `veterinarian`, `vet`, `therapist`, `counselor`, `social worker`, `freelancer`, `translator`, `analyst`, `professor`,
	`enfermeir[oa]`, `professor[a]?`, `médic[oa]`, `engenheir[oa]`, `desenvolvedor[a]?`, `programador[a]?`, `advogad[oa]`, `contador[a]?`,
	`estudante`, `cozinheir[oa]`, `garçom`, `garçonete`, `motorista`, `gerente`, `arquitet[oa]`, `dentista`, `farmacêutic[oa]`,
	`cientista`, `pesquisador[a]?`, `escritor[a]?`, `jornalista`, `fotógraf[oa]`, `artista`, `músic[oa]`, `eletricista`, `encanador`,
	`mecânic[oa]`, `policial`, `piloto`, `veterinári[oa]`, `terapeuta`, `psicólog[oa]`, `tradutor[a]?`, `analista`, `formad[oa] em`,
)

// fold lower-cases a clause and folds chat spellings to the forms the rules
// know: "im" → "i'm", "dont" → "don't", "nao" → "não", a leading "to" →
// "estou", "pra" → "para".
func fold(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.NewReplacer("’", "'", "‘", "'").Replace(s)
	words := strings.Fields(s)
	for i, w := range words {
		if r, ok := chatSpellings[w]; ok {
			words[i] = r
		}
	}
	if len(words) > 0 && (words[0] == "to" || words[0] == "tô" || words[0] == "tou") {
		words[0] = "estou"
	}
	return fillerRe.ReplaceAllString(strings.Join(words, " "), "")
}

// fillerRe: asides that say nothing about the statement ("these days",
// "btw"), dropped so that "these" is not read as pointing at something.
var fillerRe = regexp.MustCompile(`\s*\b(?:these days|nowadays|btw|tbh|honestly|hoje em dia|atualmente)\b`)

var chatSpellings = map[string]string{
	"im": "i'm", "i'm": "i'm", "ive": "i've", "dont": "don't", "cant": "can't", "wont": "won't", "didnt": "didn't", "doesnt": "doesn't",
	"id": "i'd", "i": "i", "wanna": "want to", "gonna": "going to", "nao": "não", "pra": "para", "pro": "para o", "tb": "também",
	"tbm": "também", "vc": "você", "thats": "that's", "whats": "what's", "entao": "então", "eh": "é", "q": "que", "tá": "está", "ta": "está", "msm": "mesmo",
}
