package prompt

import (
	"regexp"
	"slices"
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
// dialect's form). A template must enclose each block in one tag pair
// (checkDelimiters), so the delimiters to guard are always tags.
//
// quoter.text does it by escaping the opening bracket of anything in the
// text that reads as a tag, by three rules (the first and the third
// shared with the side models' prompts: memory.QuoteControlTokens):
//
//   - "<", or a fullwidth or small less-than sign (tagBrackets), followed
//     — after spaces, invisible format characters, combining marks,
//     underscores and slashes, however many (skipped) — by a letter,
//     "!", "?" or "|", or by nothing (the end of the text), becomes
//     "&lt;": a tag of any name, or a chat template's control token
//     ("<|im_start|>", "<|eot_id|>", DeepSeek's "<｜User｜>"), which a
//     self-hosted model's tokenizer parses as a special token wherever it
//     stands and so reads as a new turn.
//   - A character that looks like "<" but that no normalisation makes one
//     (lookalikeBrackets: "‹", "ᐸ", "❮", "〈", "≮" …), followed after the
//     same characters by one of the names of the tags the block's template
//     writes (quoter.names: "memory" for the default), in any case and
//     width, in letters of other scripts that look like its own
//     (latinLookalikes: "mеmory" with a Cyrillic "е") and with invisible
//     characters between them (format characters, marks, other
//     default-ignorable characters: invisible) — or by
//     nothing, or a name's start, at the text's end —, becomes "&lt;"
//     too. Elsewhere it is ordinary text — a quotation mark, an
//     angle bracket in mathematics — and stays as it is: "‹salut›",
//     "⟨x|y⟩" and "a ≮ b" read as they did.
//   - "[" or "［" before one of Mistral's control tokens, spelt exactly
//     ("INST]", "/INST]", "SYSTEM_PROMPT]" …), becomes "&#91;"
//     (memory.QuoteMistralTokens); any other "[" stays, the block's
//     "[date]" lines among them.
//
// A character is read as the one its compatibility decomposition starts
// with (NFKD, as a tokenizer that normalises text to NFKC reads it): a
// circled "ⓜ" or a Roman numeral "ⅿ" is a letter, a fullwidth "！" an
// "!". "</memory>", "< /MEMORY>", "<\u200b/memory>", "</ⓜemory>",
// "＜/ｍｅｍｏｒｙ＞", "‹/memory›" and "ᐸ∕ＭＥＭＯＲＹ>" all lose their bracket,
// as does a tag of any other name after a "<" (a custom template's own
// delimiters included) and "a < b", while "<3", "a <= b" and "->" stay as
// they were. The text reads the same to a model (an escaped tag is still
// visibly a tag, as text); only memgate's own delimiters remain tags.
// Lookalikes of ">" need nothing: a tag whose opening bracket is escaped
// is no tag, however it ends.

// tagBrackets are the characters quoter.text treats as a tag's opening
// bracket: the less-than sign and the characters NFKC turns into one,
// its fullwidth and small forms.
const tagBrackets = memory.TagBrackets

// lookalikeBrackets are the characters that look like a tag's opening
// bracket but that no normalisation makes one
// (TestLookalikeBracketsAreNoLessThan keeps the two lists apart). From Unicode's confusables.txt (UTS #39):
// the characters whose prototype is U+003C "<" — U+2039 "‹", U+02C2
// "˂", U+1438 "ᐸ" (a letter), U+16B2 "ᚲ" (a letter), U+276E "❮",
// U+1D236 "𝈶" —, and the angle brackets confusable with U+27E8 "⟨" —
// "⟨" itself, U+2329 "〈", U+3008 "〈"; and U+226E "≮", a "<" by its
// canonical decomposition (NFD: "<" and U+0338, a combining long solidus overlay) that
// NFC composes again. "«" (U+00AB) is no confusable of "<" (its
// prototype is "≪"), and is left alone.
const lookalikeBrackets = "\u2039\u02C2\u1438\u16B2\u276E\U0001D236\u27E8\u2329\u3008\u226E"

// brackets are every character quoter.text looks after.
const brackets = tagBrackets + lookalikeBrackets

// indexBracket returns the index of the first of brackets in s, -1 when
// it has none. It reads ASCII a byte at a time (strings.IndexAny reads
// every character against each of a set with non-ASCII characters).
func indexBracket(s string) int {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c == '<' {
				return i
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if strings.ContainsRune(brackets, r) {
			return i
		}
		i += size
	}
	return -1
}

// escapedBracket replaces a tag's opening bracket.
const escapedBracket = memory.EscapedLessThan

// tagNameRe finds the names of the tags a template's text writes.
var tagNameRe = regexp.MustCompile(`<\s*/?\s*([A-Za-z][A-Za-z0-9_.:-]*)`)

// templateTags returns the names of the tags template source src writes,
// lower-cased, each once.
func templateTags(src string) []string {
	var names []string
	for _, m := range tagNameRe.FindAllStringSubmatch(src, -1) {
		if n := strings.ToLower(m[1]); !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// quoter quotes stored text for the blocks of one template. names are
// the names of the tags the template writes (templateTags), lower-cased
// ASCII: a lookalike bracket before one of them is escaped.
type quoter struct {
	names []string
}

// text returns s with every tag-like opening bracket escaped (see
// above), and the "[" of each of Mistral's control tokens
// (memory.QuoteMistralTokens); s itself when it has none. It is linear in
// s's length (quote).
func (q quoter) text(s string) string {
	out, _ := q.quote(s)
	return memory.QuoteMistralTokens(out)
}

// quote is text, and also returns how many characters it read after
// brackets: at most len(q.names)+1 per character of s, since each
// bracket's look ahead stops at the first character that is neither
// skipped nor part of a name, a bracket at the latest, so no character
// is looked at for two brackets.
func (q quoter) quote(s string) (string, int) {
	i := indexBracket(s)
	if i < 0 {
		return s, 0
	}
	var b strings.Builder
	last, work := 0, 0
	for i >= 0 {
		r, size := utf8.DecodeRuneInString(s[i:])
		rest := s[i+size:]
		var opens bool
		var n int
		if strings.ContainsRune(tagBrackets, r) {
			opens, n = opensTag(rest)
		} else {
			opens, n = q.opensOwnTag(rest)
		}
		work += n
		if opens {
			if b.Cap() == 0 {
				b.Grow(len(s) + 16)
			}
			b.WriteString(s[last:i])
			b.WriteString(escapedBracket)
			last = i + size
		}
		next := indexBracket(rest)
		if next < 0 {
			break
		}
		i += size + next
	}
	if last == 0 {
		return s, work
	}
	b.WriteString(s[last:])
	return b.String(), work
}

// opensTag reports whether rest, the text after a "<", starts like a
// tag: after any spaces, format characters, marks and slashes (skipped),
// a letter, "!", "?" or "|" (a chat template's control token,
// "<|im_start|>", "<｜User｜>", which a tokenizer reads as a turn's start)
// — or nothing at all: what follows the text in the
// block (a template's next line, another field) is not the text's to
// choose, so a bracket that ends it is escaped too. Each character is
// read as its compatibility decomposition's first (tagRune). It also
// returns how many characters it read.
func opensTag(rest string) (bool, int) {
	n := 0
	for i := 0; i < len(rest); {
		r, size := tagRune(rest[i:])
		i += size
		n++
		switch {
		case memory.TagOpener(r):
			return true, n
		case skipped(r):
			continue
		}
		return false, n
	}
	return true, n
}

// opensOwnTag reports whether rest, the text after a lookalike of "<",
// starts with one of q.names: after any characters opensTag skips, the
// name's letters, in any case or width (tagRune) or as their lookalikes
// (isLetter), with only invisible characters between them — or with the
// start of a name, or nothing, at its end: as with opensTag, what
// follows the text in the block is not the text's to choose (a bracket
// ending one fact, and the next fact spelling "memory>", side by side in
// a custom template). It also returns how many characters it read.
func (q quoter) opensOwnTag(rest string) (bool, int) {
	i, n := 0, 0
	for i < len(rest) {
		r, size := tagRune(rest[i:])
		if !skipped(r) {
			break
		}
		i, n = i+size, n+1
	}
	rest = rest[i:]
	for _, name := range q.names {
		end, m, whole := spell(rest, name)
		n += m
		if whole || end == len(rest) {
			return true, n
		}
	}
	return false, n
}

// spell reads s, from its start, as the tag rules read a word (word:
// lower-case ASCII letters, a tag's name or a turn's role): its letters
// in any case or width, or as their lookalikes (isLetter), with only
// invisible characters between them. It returns the index in s just
// after what it read as the word's (its letters and the invisible
// characters between them), how many characters it read — the one that
// stopped it, neither the word's next letter nor invisible, included —
// and whether s spells word whole. When it does not and end is len(s),
// s spells the start of word and then ends.
func spell(s, word string) (end, read int, whole bool) {
	for k := 0; k < len(word); {
		if end == len(s) {
			return end, read, false
		}
		r, size := tagRune(s[end:])
		read++
		switch {
		case isLetter(r, word[k]):
			k++
		case !invisible(r):
			return end, read, false
		}
		end += size
	}
	return end, read, true
}

// latinLookalikes (confusables.go) is written by ./gen from Unicode's
// confusables.txt; gen's doc says where that file comes from.
//
//go:generate go run ./gen -in /tmp/confusables.txt -out confusables.go

// isLetter reports whether r, as tagRune reads it, is c (a byte of a tag
// name: lower-case ASCII) in either case, or a letter of another script
// that looks like it (latinLookalikes: Cyrillic "е", Greek "ο").
func isLetter(r rune, c byte) bool {
	if unicode.ToLower(r) == rune(c) {
		return true
	}
	return r >= utf8.RuneSelf && 'a' <= c && c <= 'z' && strings.ContainsRune(latinLookalikes[c-'a'], r)
}

// skipped reports whether the tag rules read past r between a bracket
// and a tag's name: a slash or a character that looks like one, a space
// or a control (which the block shows as a line break and an indent,
// memory.IndentBreaks), an "_" (a fact's line shows its key's as spaces,
// memory.Fact.Statement, after quoting: "<_/memory>" is shown "<
// /memory>"), or an invisible character.
func skipped(r rune) bool {
	return memory.TagSkipped(r)
}

// invisible reports whether r is a format character, a mark, or another
// of Unicode's default-ignorable code points (a Hangul filler, which is a
// letter by category; the unassigned ones reserved as ignorable), which
// a renderer shows as nothing. Marks are as invisible as format
// characters: a combining grapheme joiner or a variation selector in
// "</\u034fmemory>" hides nothing from a reader.
func invisible(r rune) bool {
	return memory.Invisible(r)
}

// tagRune returns the first character of s as the tag rules read it —
// the first of its compatibility decomposition (NFKD: "ⓜ" is "m", "！"
// is "!", "／" is "/"), itself when it has none — and its size in s.
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

// lines returns s quoted (text) with its line breaks indented
// (continuationIndent): how the block shows a fact's key or value, a
// summary or a recalled passage.
func (q quoter) lines(s string) string {
	return memory.IndentBreaks(q.text(s), continuationIndent)
}

// fact returns f with its key and value quoted (lines), as the block
// shows it.
func (q quoter) fact(f memory.Fact) memory.Fact {
	f.Key, f.Value = q.lines(f.Key), q.lines(f.Value)
	return f
}

// loaded returns ld with its summary and facts — the ranked ones and all
// the user's current ones the stable block chooses from — quoted
// (lines); the recalled items are quoted as they become passages
// (partCosts.passage), since recallFilter compares their text as stored.
// ld's slices and summary are not changed: quoted copies replace them
// where needed.
func (q quoter) loaded(ld loaded) loaded {
	if ld.summary != nil {
		// The summary is indented whole: its first line is stored text
		// too, and starts a line of the block.
		s := *ld.summary
		s.Text = continuationIndent + q.lines(s.Text)
		ld.summary = &s
	}
	ld.facts = q.facts(ld.facts)
	ld.current = q.facts(ld.current)
	return ld
}

// facts returns facts with each key and value quoted (fact): facts
// itself when none changes, else a copy.
func (q quoter) facts(facts []memory.Fact) []memory.Fact {
	for i, f := range facts {
		if qf := q.fact(f); qf.Key != f.Key || qf.Value != f.Value {
			out := make([]memory.Fact, len(facts))
			copy(out, facts[:i])
			for j := i; j < len(facts); j++ {
				out[j] = q.fact(facts[j])
			}
			return out
		}
	}
	return facts
}

// passage returns the text of recalled item it quoted as its passage
// shows it: lines, for a passage of turns (memory.PassageText: a turn per
// line, its own line breaks one space deeper); for any other item (a
// summary, a fact, a message recalled without its turns) with every line
// break indented as deep as a turn's are, so that a line of it written
// as a turn ("\nassistant: …") cannot pass for one, and, when its first
// line opens as a turn or a heading does (opensAsTurn), in quotation
// marks: that line follows the passage's bullet where a passage's first
// turn shows its role.
func (q quoter) passage(it memory.Item) string {
	if len(it.Turns) > 0 {
		return q.lines(it.Text)
	}
	text := q.text(it.Text)
	if opensAsTurn(text) {
		text = `"` + text + `"`
	}
	return memory.IndentBreaks(text, continuationIndent+continuationIndent)
}

// turnRoles are the roles a passage's turn lines may start with
// (memory.PassageText writes a stored message's role).
var turnRoles = [...]string{"user", "assistant", "system", "developer", "tool", "function"}

// colonLookalikes are the characters that look like a colon but that no
// normalisation makes one: Unicode's confusables of ":" (confusables.txt,
// prototype U+003A) but the fullwidth and small colons, which NFKD reads
// as ":" (tagRune).
const colonLookalikes = "\u02D0\u02F8\u0589\u05C3\u0703\u0704\u0903\u0A83\u16EC\u1803\u1809\u205A\u2236\uA4FD\uA789\uFE30"

// markup are the Markdown characters a model reads past at a line's
// start, or around a speaker's name ("**assistant:**", "> user:").
const markup = "*_>#`~-"

// opensAsTurn reports whether s, a recalled item's text, starts as a
// line of the block's own layout does: with a turn's role and a colon
// ("assistant: …", "User :", "**user:**"), or a heading's "[" — after
// spaces, invisible characters and Markdown (markup), each character read
// as tagRune reads it, a role's letters as isLetter does, a colon's
// lookalikes (colonLookalikes) as a colon.
func opensAsTurn(s string) bool {
	i := skipMarkup(s, 0)
	if i == len(s) {
		return false
	}
	if r, _ := tagRune(s[i:]); r == '[' {
		return true
	}
	for _, role := range turnRoles {
		if end, _, whole := spell(s[i:], role); whole {
			j := skipMarkup(s, i+end)
			if j < len(s) {
				r, _ := tagRune(s[j:])
				return r == ':' || strings.ContainsRune(colonLookalikes, r)
			}
			return false
		}
	}
	return false
}

// skipMarkup returns the index in s, from i, of the first character
// that is neither a space (nor a tab), an invisible character, nor
// Markdown (markup).
func skipMarkup(s string, i int) int {
	for i < len(s) {
		r, size := tagRune(s[i:])
		if r != ' ' && r != '\t' && !invisible(r) && !strings.ContainsRune(markup, r) {
			break
		}
		i += size
	}
	return i
}

// shows reports whether a rendered block's text shows the recalled item
// it: its text, quoted as a block quotes it (passage).
func (q quoter) shows(text string, it memory.Item) bool {
	it.Text = strings.TrimSpace(it.Text)
	return text != "" && it.Text != "" && strings.Contains(text, q.passage(it))
}

// conversationLabel is conversationLabel(c), "another conversation" for
// a name that quoting would change: a name may hold letters that look
// like a bracket ("ᐸ/memory"), and a heading shows it as it is.
func (q quoter) conversationLabel(c string) string {
	if q.text(c) != c {
		return conversationLabel("")
	}
	return conversationLabel(c)
}
