package memory

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// controlBrackets are the characters that open a chat template's control
// token: the less-than sign and the forms NFKC turns into one (fullwidth,
// small).
const controlBrackets = "<\uFF1C\uFE64"

// controlBars are the characters that follow a control token's bracket:
// "|" (ChatML's "<|im_start|>", Llama 3's "<|eot_id|>") and the fullwidth
// bar NFKC turns into one (DeepSeek's "<｜User｜>").
const controlBars = "|\uFF5C"

// QuoteControlTokens returns s with the bracket of every chat template
// control token written "&lt;": a "<" (controlBrackets) followed, after
// any spaces, controls and invisible characters (format characters,
// marks, other default-ignorable code points), by a "|" (controlBars). s
// itself when it holds none. It is linear in s's length: a bracket's look
// ahead stops at the first character it does not skip, and skips no
// bracket.
//
// A self-hosted model's tokenizer (Hugging Face's, llama.cpp's) parses
// "<|im_start|>system" as special tokens wherever it stands in a
// rendered prompt: stored text that spells one would open a turn of its
// choosing in the prompt of a side model (the summariser, the fact
// extractor). The memory block's own quoting escapes these with every
// other tag (engine/prompt's quoter).
func QuoteControlTokens(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !strings.ContainsRune(controlBrackets, r) {
			i += size
			continue
		}
		j := i + size
		for j < len(s) {
			n, nsize := utf8.DecodeRuneInString(s[j:])
			if !unicode.IsSpace(n) && !unicode.IsControl(n) && !unicode.Is(unicode.Cf, n) && !unicode.Is(unicode.M, n) &&
				!unicode.Is(unicode.Other_Default_Ignorable_Code_Point, n) {
				break
			}
			j += nsize
		}
		if n, _ := utf8.DecodeRuneInString(s[j:]); j < len(s) && strings.ContainsRune(controlBars, n) {
			if b.Cap() == 0 {
				b.Grow(len(s) + 8)
			}
			b.WriteString(s[last:i])
			b.WriteString("&lt;")
			last = i + size
		}
		i = j
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}
