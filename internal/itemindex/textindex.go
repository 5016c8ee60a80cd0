package itemindex

import (
	"context"
	"errors"
	"fmt"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/contract"
)

// posting is one item holding a term: the item's index in its textIndex
// and how often the term occurs in it.
type posting struct {
	doc, tf int32
}

// textIndex is one user's inverted index: every item's words, split and
// folded by ForEachWord, with the statistics BM25 needs (item count,
// lengths, document frequencies). It is read and extended under its slot's
// mutex only.
type textIndex struct {
	held
	lens     []int32 // words per item
	total    int64   // words of all items
	postings map[string][]posting
	bytes    int // roughly what the index holds in memory
	// scores and touched are scratch space for one search at a time.
	scores  []float64
	touched []int32
}

// size is roughly what t holds in memory, in bytes.
func (t *textIndex) size() int { return t.bytes }

// addDoc indexes one item.
func (t *textIndex) addDoc(id int64, conv, ref string, text []byte) {
	doc := int32(len(t.ids))
	t.ids = append(t.ids, id)
	t.convs = append(t.convs, conv)
	t.refs = append(t.refs, ref)
	t.maxID = max(t.maxID, id)
	counts := map[string]int32{}
	words := int32(0)
	ForEachWord(text, func(w []byte) {
		words++
		counts[string(w)]++
	})
	for w, tf := range counts {
		ps, ok := t.postings[w]
		if !ok {
			t.bytes += len(w) + 64
		}
		t.postings[w] = append(ps, posting{doc: doc, tf: tf})
		t.bytes += 8
	}
	t.lens = append(t.lens, words)
	t.total += int64(words)
	t.bytes += 8 + 4 + 16 + len(conv) + 16 + len(ref)
}

// bm25Term is one query term's postings and idf (a related term's times
// its weight).
type bm25Term struct {
	postings []posting
	idf      float64
}

// search ranks the index's items for terms and related terms by Okapi
// BM25 (memory.BM25K1, memory.BM25B) and returns the best limit that keep
// accepts, best first, ties lower id first. A term's idf is
// ln((N - df + 0.5) / (df + 0.5)) floored at 1e-6 (FTS5's floor), a
// related term's times its weight; a term in half the items or more and in
// more than memory.CommonTermMinDF of them is left out unless every one of
// terms is, and a related term already in 1/memory.RelatedCommonDivisor of
// them (see memory.RelatedTerm).
// Items matching no term are never returned.
func (t *textIndex) search(terms []string, related []memory.RelatedTerm, limit int, keep func(doc int32) bool) []Scored {
	n := float64(len(t.ids))
	if n == 0 || limit <= 0 {
		return nil
	}
	common := func(ps []posting) bool {
		return 2*len(ps) >= len(t.ids) && len(ps) > memory.CommonTermMinDF
	}
	idf := func(ps []posting) float64 { return contract.BM25IDF(n, float64(len(ps))) }
	var all, selective []bm25Term
	seen := make(map[string]bool, len(terms))
	for _, w := range terms {
		f := FoldWord(w)
		if seen[f] {
			continue
		}
		seen[f] = true
		ps := t.postings[f]
		if len(ps) == 0 {
			continue
		}
		bt := bm25Term{postings: ps, idf: idf(ps)}
		all = append(all, bt)
		if !common(ps) {
			selective = append(selective, bt)
		}
	}
	if len(selective) > 0 {
		all = selective
	}
	// Each related term once, with its highest weight, unless it is one
	// of terms.
	var weights map[string]float64
	var order []string
	if len(related) > 0 {
		weights = make(map[string]float64, len(related))
		order = make([]string, 0, len(related))
	}
	for _, r := range related {
		f := FoldTerm(r.Term)
		if seen[f] || r.Weight <= 0 {
			continue
		}
		w, ok := weights[f]
		if !ok {
			order = append(order, f)
		}
		weights[f] = max(w, min(r.Weight, 1))
	}
	for _, f := range order {
		ps := t.postings[f]
		if len(ps) > 0 && !(memory.RelatedCommonDivisor*len(ps) >= len(t.ids) && len(ps) > memory.CommonTermMinDF) {
			all = append(all, bm25Term{postings: ps, idf: idf(ps) * weights[f]})
		}
	}
	if len(all) == 0 {
		return nil
	}
	if cap(t.scores) < len(t.ids) {
		t.scores = make([]float64, len(t.ids))
	}
	scores := t.scores[:len(t.ids)]
	touched := t.touched[:0]
	avg := float64(t.total) / n
	for _, bt := range all {
		for _, p := range bt.postings {
			if scores[p.doc] == 0 {
				touched = append(touched, p.doc)
			}
			scores[p.doc] += contract.BM25(bt.idf, float64(p.tf), float64(t.lens[p.doc]), avg)
		}
	}
	top := make(TopK, 0, limit+1)
	for _, d := range touched {
		// A candidate no better than a full top's worst is dropped before
		// it is offered (Offer would drop it too).
		if c := (Scored{ID: t.ids[d], Score: scores[d]}); (len(top) < limit || top[0].worse(c)) && keep(d) {
			top.Offer(c, limit)
		}
		scores[d] = 0
	}
	t.touched = touched[:0]
	return top.Sorted()
}

// withTextIndex runs fn on the user's index, current as of a moment during
// the call (extended with the rows added since it was read when only
// inserts happened, else read again whole), holding the slot's mutex. It
// returns ErrTooBig for a user too large to index in memory.
func (x *Index) withTextIndex(ctx context.Context, rev cache.Revisions, tenant, user string, fn func(t *textIndex)) error {
	key := Key{Tenant: tenant, User: user}
	sl := x.texts.slot(key)
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.tooBig {
		return ErrTooBig
	}
	// rev was read before the rows: rows read later can only be newer than
	// it says, and the next search then reads again.
	t := sl.val
	if t == nil || t.changed != rev.Changed || t.added != rev.Added {
		if t == nil || t.changed != rev.Changed {
			t = &textIndex{postings: map[string][]posting{}}
		}
		t.added, t.changed = rev.Added, rev.Changed
		if err := x.loadTexts(ctx, tenant, user, t, x.texts.limit()); err != nil {
			sl.tooBig = errors.Is(err, ErrTooBig)
			x.texts.publish(key, sl, nil)
			return err
		}
		x.texts.publish(key, sl, t)
	}
	fn(t)
	return nil
}

// loadTexts indexes into t the user's items with ids above t.maxID; an
// index past limit bytes fails with ErrTooBig.
func (x *Index) loadTexts(ctx context.Context, tenant, user string, t *textIndex, limit int) error {
	err := x.src.LoadTexts(ctx, tenant, user, t.maxID, func(id int64, conv, ref string, text []byte) error {
		t.addDoc(id, conv, ref, text)
		if t.bytes > limit {
			return ErrTooBig
		}
		return nil
	})
	if err != nil && !errors.Is(err, ErrTooBig) {
		return fmt.Errorf("load texts: %w", err)
	}
	return err
}
