package prompt

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/memgate/memgate/internal/memory"
)

// Stored text is data (house rule 25): whatever memgate stored — a user's,
// an assistant's or a tool's words, a summary, a fact — is written into
// the memory block so that it cannot end the block's delimiters, or open a
// new one, in any rendering (the default template, a custom one, each
// dialect's form).
//
// quoteText does it by escaping the opening bracket of anything in the
// text that reads as a tag: "<", or a fullwidth or small less-than sign,
// followed — after spaces, invisible format characters, combining marks
// and slashes, however many — by a letter, "!" or "?", or by nothing (the
// end of the text), becomes "&lt;". A character is read as the one its
// compatibility decomposition starts with (NFKD, as a tokenizer that
// normalises text to NFKC reads it): a circled "ⓜ" or a Roman numeral
// "ⅿ" is a letter, a fullwidth "！" an "!". "</memory>", "< /MEMORY>",
// "<\u200b/memory>", "</ⓜemory>" and "＜/ｍｅｍｏｒｙ＞" all lose their
// bracket, as does a tag of any other name (a custom template's own
// delimiters included) and "a < b", while "<3", "a <= b" and "->" stay as
// they were. The text reads the same to a model (an escaped tag is still
// visibly a tag, as text); only memgate's own delimiters remain tags.

// tagBrackets are the characters quoteText treats as a tag's opening
// bracket: the less-than sign and the characters NFKC turns into one,
// its fullwidth and small forms.
const tagBrackets = "<\uFF1C\uFE64"

// slashLookalikes are the characters that look like a slash or a
// backslash (Unicode's confusables of "/" and "\\" that are not
// letters) but that no normalisation makes one: opensTag skips them as it
// skips slashes, so "<∕memory>" loses its bracket too.
const slashLookalikes = "\u2041\u2044\u2215\u2216\u2571\u2572\u27CB\u27CD\u29F5\u29F8\u29F9\u3033\u31D3\u31D4"

// escapedBracket replaces a tag's opening bracket.
const escapedBracket = "&lt;"

// quoteText returns s with every tag-like opening bracket escaped (see
// above); s itself when it has none. It is linear in s's length: each
// bracket's look ahead stops at the first character that is not
// skipped, a bracket at the latest, so no character is looked at for
// two brackets.
func quoteText(s string) string {
	i := strings.IndexAny(s, tagBrackets)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	last := 0
	for i >= 0 {
		_, size := utf8.DecodeRuneInString(s[i:])
		if opensTag(s[i+size:]) {
			b.WriteString(s[last:i])
			b.WriteString(escapedBracket)
			last = i + size
		}
		next := strings.IndexAny(s[i+size:], tagBrackets)
		if next < 0 {
			break
		}
		i += size + next
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// opensTag reports whether rest, the text after a bracket, starts like a
// tag: after any spaces, format characters, marks and slashes, a letter,
// "!" or "?" — or nothing at all: what follows the text in the block (a
// template's next line, another field) is not the text's to choose, so a
// bracket that ends it is escaped too. Each character is read as its
// compatibility decomposition's first (tagRune).
func opensTag(rest string) bool {
	for i := 0; i < len(rest); {
		r, size := tagRune(rest[i:])
		i += size
		switch {
		case unicode.IsLetter(r) || r == '!' || r == '?':
			return true
		case r == '/' || r == '\\' || strings.ContainsRune(slashLookalikes, r) || unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.M, r):
			// Marks are as invisible as format characters: a combining
			// grapheme joiner or a variation selector in "</\u034fmemory>"
			// hides nothing from a reader.
			continue
		}
		return false
	}
	return true
}

// tagRune returns the first character of s as opensTag reads it — the
// first of its compatibility decomposition (NFKD: "ⓜ" is "m", "！" is
// "!", "／" is "/"), itself when it has none — and its size in s.
func tagRune(s string) (rune, int) {
	r, size := utf8.DecodeRuneInString(s)
	if r < utf8.RuneSelf {
		return r, size
	}
	if d := norm.NFKD.PropertiesString(s).Decomposition(); len(d) > 0 {
		r, _ = utf8.DecodeRune(d)
	}
	return r, size
}

// continuationIndent is what each line of stored text after its first
// starts with in the block (memory.IndentBreaks): deeper than the lines
// memgate itself starts — headings, "[date]" lines, "- " bullets, a
// passage's "role:" lines (which recall indents under the bullet) — so
// stored text with line breaks cannot forge any of them. One space: the
// tokenizers join it to the word after it, so it costs no token (two
// spaces cost one per line, 2.3 % of a LoCoMo prompt's memory block).
const continuationIndent = " "

// quoteLines returns s quoted (quoteText) with its line breaks indented
// (continuationIndent): how the block shows a fact's key or value, a
// summary or a recalled passage.
func quoteLines(s string) string {
	return memory.IndentBreaks(quoteText(s), continuationIndent)
}

// quoteFact returns f with its key and value quoted (quoteLines), as the
// block shows it.
func quoteFact(f memory.Fact) memory.Fact {
	f.Key, f.Value = quoteLines(f.Key), quoteLines(f.Value)
	return f
}

// quoted returns ld with its summary and facts — the ranked ones and all
// the user's current ones the stable block chooses from — quoted
// (quoteLines); the recalled items are quoted as they become passages
// (partCosts.passage), since recallFilter compares their text as stored.
// ld's slices and summary are not changed: quoted copies replace them
// where needed.
func quoted(ld loaded) loaded {
	if ld.summary != nil {
		// The summary is indented whole: its first line is stored text
		// too, and starts a line of the block.
		s := *ld.summary
		s.Text = continuationIndent + quoteLines(s.Text)
		ld.summary = &s
	}
	ld.facts = quotedFacts(ld.facts)
	ld.current = quotedFacts(ld.current)
	return ld
}

// quotedFacts returns facts with each key and value quoted (quoteFact):
// facts itself when none changes, else a copy.
func quotedFacts(facts []memory.Fact) []memory.Fact {
	for i, f := range facts {
		if q := quoteFact(f); q.Key != f.Key || q.Value != f.Value {
			out := make([]memory.Fact, len(facts))
			copy(out, facts[:i])
			for j := i; j < len(facts); j++ {
				out[j] = quoteFact(facts[j])
			}
			return out
		}
	}
	return facts
}
