package ranking

import (
	"unicode"
	"unicode/utf8"
)

// ForEachWord calls fn with each word of text (a run of letters, digits
// and combining marks), lower-cased and stripped of the diacritics of the
// common Latin letters, as SQLite FTS5's unicode61 tokenizer with
// remove_diacritics splits and folds it; w is reused between calls.
func ForEachWord(text []byte, fn func(w []byte)) {
	var buf [64]byte
	for i := 0; i < len(text); {
		if c := text[i]; c < utf8.RuneSelf {
			if asciiFold[c] == 0 {
				i++
				continue
			}
		} else if c, size := utf8.DecodeRune(text[i:]); !isWordRune(c) {
			i += size
			continue
		}
		w := buf[:0]
		for i < len(text) {
			if c := text[i]; c < utf8.RuneSelf {
				f := asciiFold[c]
				if f == 0 {
					break
				}
				w = append(w, f)
				i++
				continue
			}
			c, size := utf8.DecodeRune(text[i:])
			if !isWordRune(c) {
				break
			}
			w = utf8.AppendRune(w, foldRune(c))
			i += size
		}
		fn(w)
	}
}

// asciiFold maps an ASCII byte of a word to its lower case, and every
// other ASCII byte to 0.
var asciiFold = func() (t [utf8.RuneSelf]byte) {
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c)
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = byte(c)
		t[c-'a'+'A'] = byte(c)
	}
	return t
}()

// isWordRune reports whether c belongs to a word: a letter, digit or
// combining mark.
func isWordRune(c rune) bool {
	if c < utf8.RuneSelf {
		return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
	}
	return unicode.IsLetter(c) || unicode.IsDigit(c) || unicode.Is(unicode.Mn, c)
}

// FoldTerm is FoldWord without a copy for a word of lower-case ASCII
// letters and digits, as related terms are.
func FoldTerm(w string) string {
	for i := 0; i < len(w); i++ {
		if c := w[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return FoldWord(w)
		}
	}
	return w
}

// FoldWord lower-cases w and strips the diacritics ForEachWord strips.
func FoldWord(w string) string {
	b := make([]byte, 0, len(w))
	for _, c := range w {
		b = utf8.AppendRune(b, foldRune(c))
	}
	return string(b)
}

// foldRune lower-cases c and strips the diacritics of the common Latin
// letters (Portuguese, Spanish, French, German).
func foldRune(c rune) rune {
	c = unicode.ToLower(c)
	if c < 0xe0 || c > 0x17f {
		return c
	}
	switch c {
	case 'à', 'á', 'â', 'ã', 'ä', 'å':
		return 'a'
	case 'ç':
		return 'c'
	case 'è', 'é', 'ê', 'ë':
		return 'e'
	case 'ì', 'í', 'î', 'ï':
		return 'i'
	case 'ñ':
		return 'n'
	case 'ò', 'ó', 'ô', 'õ', 'ö':
		return 'o'
	case 'ù', 'ú', 'û', 'ü':
		return 'u'
	case 'ý', 'ÿ':
		return 'y'
	}
	return c
}
