package recall

import (
	"cmp"
	"slices"

	"github.com/memgate/memgate/internal/lexicon"
	"github.com/memgate/memgate/internal/memory"
)

// Query expansion weights, relative to a word of the query (1): another
// inflection of a query word ("sisters" for "sister"), and, times the
// link's own weight in (0, 1], a concept of a query word (its synonyms
// and broader terms: "dogs" → animal) and a word that has a query word
// among its concepts (its narrower terms: "instrument" → trombone).
// A word reached from several query words adds their weights, up to
// maxRelatedWeight, so a trombone (both an "instrument" and "musical") ranks
// above a legal instrument for "musical instrument".
const (
	formWeight       = 0.8
	broaderWeight    = 0.5
	narrowerWeight   = 0.5
	maxRelatedWeight = 0.5
)

// Bounds of one query's expansion, the highest weights kept: at most
// maxNarrower narrower words of each query word (a category like "animal"
// has thousands), and maxRelatedBases related words in all before their
// inflections are added (two or three each: see lexicon.AppendNounForms),
// so a store looks up at most a few hundred related terms.
const (
	maxNarrower     = 512
	maxRelatedBases = 128
)

// Expander finds the words related to a query's, for the full-text
// search (memory.ItemQuery.Related), from the English lexicon. It is
// immutable and safe for concurrent use.
type Expander struct {
	lex *lexicon.Lexicon
}

// NewExpander returns an Expander over lex.
func NewExpander(lex *lexicon.Lexicon) *Expander { return &Expander{lex: lex} }

// Related returns the words related to terms (a query's words, as
// memory.QueryTerms gives them): the other inflections of each term's base
// form, then the inflections of the maxRelatedBases words of highest
// weight among its concepts and the words that have it among their
// concepts (see the weights above; at most maxNarrower of those per
// term). No related word is one of terms; a word is listed once unless
// inflections of two related words coincide ("bone" and "bones" both
// give "bones"; a store counts it once, with its highest weight, which
// comes first). The order depends only on terms. A nil Expander relates
// nothing.
func (e *Expander) Related(terms []string) []memory.RelatedTerm {
	if e == nil || e.lex == nil || len(terms) == 0 {
		return nil
	}
	own := make(map[string]bool, len(terms))
	for _, t := range terms {
		own[t] = true
	}
	// Each term's base form, concepts and narrower words, looked up first
	// so the tables below are sized once.
	type related struct {
		base              string
		broader, narrower lexicon.Concepts
	}
	rel := make([]related, 0, len(terms))
	size := 0
	for _, t := range terms {
		base, cs := e.lex.Lookup(t)
		if base == "" {
			continue
		}
		ns := e.lex.Narrower(base)
		rel = append(rel, related{base: base, broader: cs, narrower: ns})
		size += cs.Len() + min(ns.Len(), maxNarrower)
	}
	if len(rel) == 0 {
		return nil
	}
	ranked := make([]memory.RelatedTerm, 0, size)
	at := make(map[string]int, size) // related base form -> index in ranked
	relate := func(w string, weight float64) {
		if i, ok := at[w]; ok {
			ranked[i].Weight += weight
			return
		}
		at[w] = len(ranked)
		ranked = append(ranked, memory.RelatedTerm{Term: w, Weight: weight})
	}
	for _, r := range rel {
		for i := range r.broader.Len() {
			c := r.broader.At(i)
			relate(c.Word, broaderWeight*float64(c.Weight))
		}
		for i := range min(r.narrower.Len(), maxNarrower) {
			c := r.narrower.At(i)
			relate(c.Word, narrowerWeight*float64(c.Weight))
		}
	}
	slices.SortStableFunc(ranked, func(a, b memory.RelatedTerm) int { return cmp.Compare(b.Weight, a.Weight) })
	kept := ranked[:0]
	for _, r := range ranked {
		if len(kept) == maxRelatedBases {
			break
		}
		if len(r.Term) >= 3 && plainWord(r.Term) && relatable(r.Term, own) {
			kept = append(kept, r)
		}
	}
	ranked = kept
	out := make([]memory.RelatedTerm, 0, 4*(len(rel)+len(ranked)))
	forms := make([]string, 0, 8)
	for _, r := range rel {
		forms = e.lex.AppendForms(forms[:0], r.base)
		for _, f := range forms {
			if !own[f] {
				out = append(out, memory.RelatedTerm{Term: f, Weight: formWeight})
			}
		}
	}
	for _, r := range ranked {
		w := min(r.Weight, maxRelatedWeight)
		forms = e.lex.AppendNounForms(forms[:0], r.Term)
		for _, f := range forms {
			if !own[f] {
				out = append(out, memory.RelatedTerm{Term: f, Weight: w})
			}
		}
	}
	return out
}

// relatable reports whether w may be a related term: not one of the
// query's own words (own), nor a stopword or function word.
func relatable(w string, own map[string]bool) bool {
	return !own[w] && !memory.Stopword(w) && !lexicon.FunctionWord(w)
}

// plainWord reports whether w is a word of lower-case ASCII letters, as
// both stores' indexes hold it unchanged.
func plainWord(w string) bool {
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return w != ""
}
