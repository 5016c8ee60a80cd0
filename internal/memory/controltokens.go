package memory

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Stored text never speaks with a chat template's voice: a self-hosted
// model's tokenizer (Hugging Face's, llama.cpp's) parses a template's
// control tokens as special tokens wherever they stand in a rendered
// prompt, so stored text that spells one could end its turn and open one
// of its choosing. The memory block (engine/prompt's quoter) and the
// prompts of the side models (the summariser, the fact extractor:
// QuoteControlTokens) escape them by the same two rules:
//
//   - A tag-like "<" (TagOpener, TagSkipped) becomes "&lt;": ChatML's
//     "<|im_start|>", Llama 3's "<|eot_id|>", DeepSeek's "<｜User｜>",
//     Gemma's "<start_of_turn>", Llama 2's "<<SYS>>" and "[INST]"'s
//     "</s>", and any other tag.
//   - The "[" of one of Mistral's control tokens (mistralTokens:
//     "[INST]", "[/INST]", "[SYSTEM_PROMPT]" …), spelt exactly as the
//     tokenizer spells it, becomes "&#91;" (its numeric character
//     reference, as "&lt;" is "<"'s). Any other "[" stays: the block's
//     own "[date]" lines, a Markdown link.
//
// Both over-escape on purpose: Haskell's "<|>" reads "&lt;|>", "a <b"
// reads "a &lt;b". The text still reads the same to a model.

// TagBrackets are the characters read as a tag's opening bracket: the
// less-than sign and the characters NFKC turns into one, its fullwidth
// and small forms.
const TagBrackets = "<\uFF1C\uFE64"

// squareBrackets are the characters read as the opening bracket of one
// of Mistral's control tokens: "[" and its fullwidth form, which NFKC
// turns into one.
const squareBrackets = "[\uFF3B"

// EscapedLessThan replaces a tag's opening bracket.
const EscapedLessThan = "&lt;"

// EscapedSquareBracket replaces the opening bracket of one of Mistral's
// control tokens.
const EscapedSquareBracket = "&#91;"

// mistralTokens are Mistral's control tokens (its v3 and tekken
// tokenizers' special tokens written in square brackets), without their
// opening bracket. Matching is case-sensitive, as the tokenizer's is.
var mistralTokens = []string{
	"INST]", "/INST]", "SYSTEM_PROMPT]", "/SYSTEM_PROMPT]",
	"AVAILABLE_TOOLS]", "/AVAILABLE_TOOLS]", "TOOL_CALLS]", "TOOL_RESULTS]", "/TOOL_RESULTS]", "TOOL_CONTENT]",
	"THINK]", "/THINK]", "ARGS]", "CALL_ID]", "IMG]", "IMG_BREAK]", "IMG_END]", "PREFIX]", "MIDDLE]", "SUFFIX]",
}

// slashLookalikes are the characters that look like a slash or a
// backslash but that no normalisation makes one: Unicode's confusables
// of "/" and "\\" (confusables.txt, prototypes U+002F and U+005C), their
// letters included ("ノ", "丿", "Ⳇ", "丶"; "⼃" and "⼂" are read as "丿"
// and "丶" by a reader that decomposes them). TagSkipped skips them as it
// skips slashes, so "<∕memory>" and "‹ノmemory›" lose their bracket too.
const slashLookalikes = "\u1735\u2041\u2044\u2215\u2216\u2571\u2572\u27CB\u27CD\u29F5\u29F8\u29F9\u2CC6\u3033\u30CE\u31D3\u31D4\u4E36\u4E3F" +
	"\U0001D20F\U0001D23A\U0001D23B"

// TagOpener reports whether r, the first character after a tag's
// opening bracket that TagSkipped does not skip, makes the bracket a
// tag's: a letter, "!", "?", or a bar ("|", or the fullwidth "｜" of
// DeepSeek's "<｜User｜>"): a tag of any name or a control token. A
// bracket followed by nothing but skipped characters, at the text's end,
// opens a tag too: what follows the text is not the text's to choose.
func TagOpener(r rune) bool {
	return unicode.IsLetter(r) || r == '!' || r == '?' || r == '|' || r == '\uFF5C'
}

// TagSkipped reports whether the tag rule reads past r between a tag's
// bracket and what opens it (TagOpener): a slash or a character that
// looks like one, a space or a control, an "_" (a fact's line shows its
// key's as spaces), or an invisible character (Invisible).
func TagSkipped(r rune) bool {
	return r == '/' || r == '\\' || r == '_' || strings.ContainsRune(slashLookalikes, r) || unicode.IsSpace(r) || unicode.IsControl(r) || Invisible(r)
}

// Invisible reports whether r is a format character, a mark, or another
// of Unicode's default-ignorable code points (a Hangul filler, which is a
// letter by category; the unassigned ones reserved as ignorable), which
// a renderer shows as nothing.
func Invisible(r rune) bool {
	return unicode.Is(unicode.Cf, r) || unicode.Is(unicode.M, r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r)
}

// foldWidth returns r read as NFKC reads a fullwidth ASCII form ("／" is
// "/", "！" is "!"): the standard library's part of the compatibility
// decomposition engine/prompt reads in full.
func foldWidth(r rune) rune {
	if '\uFF01' <= r && r <= '\uFF5E' {
		return r - 0xFEE0
	}
	return r
}

// QuoteControlTokens returns s with every tag-like "<" and the "[" of
// every one of Mistral's control tokens escaped (see above), for the
// prompt of a side model; s itself when it holds none. A character is
// read with its fullwidth form folded to ASCII. It is linear in s's
// length: a "<"'s look ahead stops at the first character it does not
// skip, and skips no bracket; a "["'s reads at most a token's length.
func QuoteControlTokens(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		next := i + size
		if strings.ContainsRune(TagBrackets, r) {
			for next < len(s) {
				n, nsize := utf8.DecodeRuneInString(s[next:])
				if !TagSkipped(foldWidth(n)) {
					break
				}
				next += nsize
			}
			if n, _ := utf8.DecodeRuneInString(s[next:]); next == len(s) || TagOpener(foldWidth(n)) {
				last = escapeAt(&b, s, last, i, size, EscapedLessThan)
			}
		}
		i = next
	}
	if last == 0 {
		return QuoteMistralTokens(s)
	}
	b.WriteString(s[last:])
	return QuoteMistralTokens(b.String())
}

// QuoteMistralTokens returns s with the opening bracket of each of
// Mistral's control tokens in it (mistralTokens, after "[" or "［", each
// character read with its fullwidth form folded) written "&#91;"; s
// itself when it holds none. It is linear in s's length.
func QuoteMistralTokens(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); {
		j := strings.IndexAny(s[i:], squareBrackets)
		if j < 0 {
			break
		}
		i += j
		_, size := utf8.DecodeRuneInString(s[i:])
		if mistralToken(s[i+size:]) {
			last = escapeAt(&b, s, last, i, size, EscapedSquareBracket)
		}
		i += size
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// escapeAt writes to b the text of s from last to i, then esc in place
// of the bracket of size bytes at i, and returns where the text after it
// starts.
func escapeAt(b *strings.Builder, s string, last, i, size int, esc string) int {
	if b.Cap() == 0 {
		b.Grow(len(s) + 16)
	}
	b.WriteString(s[last:i])
	b.WriteString(esc)
	return i + size
}

// mistralToken reports whether rest, the text after a square bracket,
// starts with one of mistralTokens, each of its characters read with its
// fullwidth form folded.
func mistralToken(rest string) bool {
	for _, tok := range mistralTokens {
		if foldedPrefix(rest, tok) {
			return true
		}
	}
	return false
}

// foldedPrefix reports whether s starts with p (ASCII), each character
// of s read with its fullwidth form folded.
func foldedPrefix(s, p string) bool {
	for k := 0; k < len(p); {
		if len(s) == 0 {
			return false
		}
		r, size := utf8.DecodeRuneInString(s)
		if foldWidth(r) != rune(p[k]) {
			return false
		}
		s, k = s[size:], k+1
	}
	return true
}
