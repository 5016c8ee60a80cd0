package synth

import (
	"fmt"
	"strings"
)

// Ordinary chatter: requests and small talk that carry none of the planted
// values (no digits, no names, no places, no diets or jobs).
var (
	chatterTemplates = []string{
		"Can you suggest a %s recipe for %s?",
		"What's a good way to %s?",
		"Tell me something interesting about %s.",
		"Explain %s in simple terms.",
		"Could you help me write %s?",
		"Pode me explicar %s de um jeito simples?",
		"Você tem alguma dica para %s?",
		"Me conta uma curiosidade sobre %s.",
	}
	chatterSlots = [][][]string{
		{{"quick", "cheap", "healthy", "cozy", "lazy weekend"}, {"pasta", "soup", "salad", "curry", "an omelette", "risotto"}},
		{{"stay focused while working from home", "sleep better", "keep my plants alive", "organise my inbox", "stop procrastinating", "make small talk at parties", "learn to touch type", "keep my desk tidy"}},
		{{"octopuses", "crows", "elephants", "bees", "sharks", "owls", "the deep sea", "volcanoes"}},
		{{"compound interest", "how vaccines work", "photosynthesis", "inflation", "black holes", "machine learning", "the stock market", "how tides work"}},
		{{"a polite email declining a meeting", "a birthday message for a coworker", "a short complaint to my internet provider", "a thank-you note for a neighbour", "a cover letter opening line"}},
		{{"juros compostos", "inflação", "fotossíntese", "buracos negros", "como funciona a internet"}},
		{{"dormir melhor", "organizar a casa", "estudar com foco", "cozinhar mais rápido", "economizar energia em casa"}},
		{{"polvos", "corujas", "abelhas", "tubarões", "vulcões"}},
	}
	smallTalk = []string{
		"Thanks, that helps a lot.",
		"Haha, fair enough.",
		"Can you make that shorter?",
		"Ok, what else should I keep in mind?",
		"Hmm, I'm not sure I follow, can you rephrase?",
		"Obrigado, ajudou bastante!",
		"Good morning! Busy day ahead.",
		"I'm a bit tired today, keep it brief please.",
		"That's great, thank you!",
		"Nice, I'll try that tonight.",
		"Boa noite! Tudo bem por aí?",
		"Interesting, tell me more.",
	}
	leadIns = []string{"Oh, by the way,", "Random update:", "Before I forget,", "Aliás,", "Quick note:"}
)

// chatter returns one ordinary user message.
func (g *gen) chatter() string {
	if g.rng.IntN(4) == 0 {
		return smallTalk[g.rng.IntN(len(smallTalk))]
	}
	i := g.rng.IntN(len(chatterTemplates))
	args := make([]any, len(chatterSlots[i]))
	for j, pool := range chatterSlots[i] {
		args[j] = pool[g.rng.IntN(len(pool))]
	}
	return fmt.Sprintf(chatterTemplates[i], args...)
}

// bury hides a statement in an ordinary message: alone, after a lead-in, or
// followed by an unrelated request.
func (g *gen) bury(statement string) string {
	switch g.rng.IntN(4) {
	case 0:
		lead := leadIns[g.rng.IntN(len(leadIns))]
		return lead + " " + lowerFirst(statement)
	case 1:
		return statement + " Anyway, " + lowerFirst(g.chatter())
	}
	return statement
}

// lowerFirst lowers the first letter, except for the pronoun "I".
func lowerFirst(s string) string {
	if s == "" || s == "I" || strings.HasPrefix(s, "I ") || strings.HasPrefix(s, "I'") {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}
