package memory

import (
	"iter"
	"strings"
	"unicode"
	"unicode/utf8"
)

// QueryTerms returns the words of user text that a full-text search looks
// for: its distinct lower-cased words (runs of letters, digits and marks,
// so no punctuation or operator reaches a query parser) that are not
// stopwords — or the stopwords, when nothing else is left — at most max of
// them, in order of appearance. Both stores build their full-text queries
// from it. It reads text only as far as its first max terms: a message of
// megabytes is its own query, read on the request path.
func QueryTerms(text string, max int) []string {
	seen := map[string]bool{}
	var terms, stop []string
	eachQueryWord(text, func(b []byte) bool {
		if seen[string(b)] {
			return true
		}
		w := string(b)
		seen[w] = true
		if !stopwords[w] {
			terms = append(terms, w)
			return len(terms) < max
		}
		if len(terms) == 0 {
			stop = append(stop, w)
		}
		return true
	})
	if len(terms) == 0 {
		terms = stop
	}
	if len(terms) > max {
		terms = terms[:max]
	}
	return terms
}

// BM25 parameters both stores rank full-text matches with (Okapi BM25, as
// FTS5's bm25): term frequency saturation and length normalisation.
const (
	BM25K1 = 1.2
	BM25B  = 0.75
)

// CommonTermMinDF is the document frequency above which a query term found
// in half a user's items or more is left out of a full-text search: its
// BM25 weight is floored to nearly nothing (idf ln((N-df+0.5)/(df+0.5)) <=
// 0), and its posting list is the longest to read. Speaker names and the
// commonest words are such terms in a long conversation.
const CommonTermMinDF = 100

// RelatedTerm is one word a full-text search looks for besides the query's
// own, with a weight in (0, 1] its BM25 contribution is multiplied by.
//
// Both stores apply related terms the same way: a term is a lower-case
// word as it appears in text (stores fold it as they fold indexed words);
// a related term that is also one of the query's own words, or is listed
// twice, counts once, as the query's word or with its highest weight; a
// weight above 1 counts as 1 and one of 0 or less leaves the term out; a
// related term in at least 1/RelatedCommonDivisor of the user's items and
// in more than CommonTermMinDF of them is left out (see
// RelatedCommonDivisor); and an item holding only related terms still
// matches.
type RelatedTerm struct {
	Term   string
	Weight float64
}

// RelatedCommonDivisor sets which related terms a full-text search leaves
// out: one found in at least 1/RelatedCommonDivisor of the user's items
// (and in more than CommonTermMinDF of them). Its idf, times a weight
// below 1, would add little to any item's score, and its posting list is
// long: a broad category brings everyday words ("animal" → dog, cat).
const RelatedCommonDivisor = 20

// QueryStopwords returns the distinct stopwords of text (lower case), in
// order of appearance, when text has other words too: the words QueryTerms
// leaves out. A text of stopwords alone has none left out, and gives nil.
func QueryStopwords(text string) []string {
	seen := map[string]bool{}
	var stop []string
	other := false
	eachQueryWord(text, func(b []byte) bool {
		if !stopwords[string(b)] {
			other = true
		} else if !seen[string(b)] {
			w := string(b)
			seen[w] = true
			stop = append(stop, w)
		}
		return true
	})
	if !other {
		return nil
	}
	return stop
}

// eachQueryWord calls fn with each of the Words of text lower-cased, as
// strings.ToLower lower-cases (rune by rune), in a buffer reused between
// calls, until fn returns false: the words of the text lower-cased, read
// without a copy of the whole text (lower-casing a letter gives a letter).
func eachQueryWord(text string, fn func(w []byte) bool) {
	var buf []byte
	for w := range Words(text) {
		buf = buf[:0]
		for _, r := range w {
			buf = utf8.AppendRune(buf, unicode.ToLower(r))
		}
		if !fn(buf) {
			return
		}
	}
}

// Words yields the words of text as QueryTerms reads them, runs of
// IsWordRune, as substrings of text (no copy, no case folding).
func Words(text string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for text != "" {
			i := strings.IndexFunc(text, IsWordRune)
			if i < 0 {
				return
			}
			text = text[i:]
			j := strings.IndexFunc(text, func(r rune) bool { return !IsWordRune(r) })
			if j < 0 {
				j = len(text)
			}
			if !yield(text[:j]) {
				return
			}
			text = text[j:]
		}
	}
}

// IsWordRune reports whether r belongs to a word: a letter, digit or mark.
func IsWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) }

// Stopword reports whether w (lower case) is one of the commonest English
// and Portuguese words that QueryTerms leaves out of a query.
func Stopword(w string) bool { return stopwords[w] }

// stopwords are the commonest English and Portuguese words, left out of
// full-text queries unless nothing else is left: ORed in, a word like "the"
// matches nearly every item and makes the index read its whole posting
// list.
var stopwords = map[string]bool{
	"the": true, "a": true, "an": true, "and": true, "or": true, "to": true, "of": true, "in": true,
	"on": true, "is": true, "are": true, "was": true, "i": true, "you": true, "it": true, "for": true,
	"my": true, "me": true, "what": true, "do": true, "did": true, "does": true, "can": true, "with": true,
	"at": true, "be": true, "this": true, "that": true, "about": true, "say": true, "said": true,
	"how": true, "we": true, "your": true, "have": true, "has": true, "had": true,
	"o": true, "e": true, "de": true, "da": true, "em": true, "um": true, "uma": true,
	"que": true, "eu": true, "meu": true, "minha": true, "para": true, "com": true, "no": true,
	"na": true, "os": true, "as": true,
}
