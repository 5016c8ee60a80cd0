package prompt

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/memgate/memgate/internal/memory"
)

// RecallFill is when the tokens a prompt leaves unused go to more
// recalled passages (Options.FillRecall on).
type RecallFill string

// The RecallFill policies.
const (
	// FillAlways fills on every turn.
	FillAlways RecallFill = "always"
	// FillAsked fills only on a turn that asks something (asks): a turn
	// that states something keeps recall to Shares.StatementRecall, so
	// the volatile end of its prompt is small and what comes before it —
	// the part a provider's prompt cache serves — is most of the prompt.
	FillAsked RecallFill = "asked"
)

// asks reports whether a user turn asks something memory may answer: it
// holds a question mark, or its first word is an interrogative (English or
// Portuguese) or a request to remember or look up; and its question is
// not one put to the assistant alone (toAssistant).
func asks(text string) bool {
	if strings.ContainsAny(text, "?？¿") {
		return !toAssistant(questions(text))
	}
	first := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && r != '\''
	})
	if len(first) == 0 || !interrogatives[first[0]] {
		return false
	}
	return !toAssistant(first)
}

// interrogatives are the first words of a question or a lookup.
var interrogatives = map[string]bool{
	// English
	"what": true, "when": true, "where": true, "who": true, "whom": true, "whose": true,
	"why": true, "how": true, "which": true, "remind": true, "recall": true,
	"remember": true, "tell": true, "list": true, "find": true, "show": true,
	// Portuguese
	"que": true, "quando": true, "onde": true, "quem": true, "qual": true, "quais": true,
	"quanto": true, "quantos": true, "quantas": true, "como": true, "porque": true,
	"lembra": true, "lembre": true, "lembras": true, "diga": true, "mostre": true,
	"liste": true, "encontre": true,
}

// questions returns the words, lower case, of text's questions: each
// sentence that ends with a question mark.
func questions(text string) []string {
	var words []string
	start := 0
	for i, r := range text {
		switch r {
		case '?', '？':
			words = append(words, strings.FieldsFunc(strings.ToLower(text[start:i]), func(r rune) bool {
				return !unicode.IsLetter(r) && r != '\''
			})...)
			start = i + utf8.RuneLen(r)
		case '.', '!', '…', '\n':
			start = i + utf8.RuneLen(r)
		}
	}
	return words
}

// toAssistant reports whether a question's words (lower case) address the
// assistant alone: they name it ("you", "você") and neither the user ("I",
// "my", "we", "eu", "meu"), nor the past ("remember", "last", "lembra",
// "antes"), nor advice for the user ("suggest", "recommend", "help",
// "sugere", "ajuda": what to advise depends on what the user said
// before). Such a question asks the assistant's own view or state ("What
// about you?", "Did you make it?", "What do you think?"): what it answers
// is in the turns the prompt shows, not in what the user said long ago,
// and its turn is not filled with recalled passages. A question in the
// third person ("When did Ana move to Porto?") is not put to the assistant
// alone.
func toAssistant(words []string) bool {
	second := false
	for _, w := range words {
		switch {
		case firstPerson[w] || pastWords[w] || adviceWords[w] || hasStem(w, memoryStems):
			return false
		case secondPerson[w]:
			second = true
		}
	}
	return second
}

// hasStem reports whether w begins with one of stems.
func hasStem(w string, stems []string) bool {
	for _, st := range stems {
		if strings.HasPrefix(w, st) {
			return true
		}
	}
	return false
}

// memoryStems begin the inflected forms of the words that ask for what was
// said or advised before ("which book did you recommend", "the place you
// suggested", "o filme que você recomendou"): a question with one of them
// is not put to the assistant alone, whatever its person.
var memoryStems = []string{
	"recommend", "suggest", "mention", "rememb", "remind", "recall", "advis",
	"told", "said", "gave", "earlier", "previous",
	"recomend", "suger", "mencion", "lembr", "aconselh", "ajud", "indic", "disse", "falou", "contou",
}

// secondPerson, firstPerson, pastWords and adviceWords are the words
// toAssistant reads (English and Portuguese).
var (
	secondPerson = map[string]bool{
		"you": true, "your": true, "yours": true, "yourself": true, "you're": true, "you've": true,
		"you'd": true, "you'll": true, "ya": true, "u": true, "y'all": true,
		"você": true, "vocês": true, "tu": true, "te": true, "ti": true, "contigo": true,
		"teu": true, "tua": true, "teus": true, "tuas": true,
	}
	firstPerson = map[string]bool{
		"i": true, "me": true, "my": true, "mine": true, "myself": true, "i'm": true, "i've": true,
		"i'd": true, "i'll": true, "we": true, "us": true, "our": true, "ours": true, "we're": true,
		"we've": true, "let's": true,
		"eu": true, "mim": true, "meu": true, "minha": true, "meus": true, "minhas": true,
		"comigo": true, "nós": true, "nos": true, "nosso": true, "nossa": true, "nossos": true,
		"nossas": true, "conosco": true,
	}
	// Whole words only; the words with inflected forms are memoryStems.
	adviceWords = map[string]bool{
		"advice": true, "tip": true, "tips": true, "help": true,
		"sugestão": true, "sugestões": true, "conselho": true, "conselhos": true,
		"dica": true, "dicas": true,
	}
	pastWords = map[string]bool{
		"before": true, "ago": true, "again": true, "last": true,
		"antes": true, "atrás": true, "novamente": true, "última": true, "último": true,
		"passado": true, "passada": true,
	}
)

// currentAsks reports whether the current turn's user message asks
// something (asks); a current turn without a user message does not.
func currentAsks(current []memory.Message) bool {
	for _, m := range current {
		if m.Role == "user" {
			return asks(m.Content)
		}
	}
	return false
}
