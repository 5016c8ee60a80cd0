package prompt

import (
	"strings"
	"unicode"

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

// asks reports whether a user turn asks something: it holds a question
// mark, or its first word is an interrogative (English or Portuguese) or
// a request to remember or look up.
func asks(text string) bool {
	if strings.ContainsAny(text, "?？¿") {
		return true
	}
	first := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && r != '\''
	})
	if len(first) == 0 {
		return false
	}
	return interrogatives[first[0]]
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
