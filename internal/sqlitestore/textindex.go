package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/memgate/memgate/internal/memory"
)

// textCacheBytes bounds the full-text indexes a Store keeps in memory for
// SearchText, over all users (least recently searched evicted first). A
// user whose index alone exceeds a quarter of it (about 250,000 items of
// twenty words) is searched by the windowed FTS5 ranking instead.
const textCacheBytes = 128 << 20

// posting is one item holding a term: the item's index in its textIndex
// and how often the term occurs in it.
type posting struct {
	doc, tf int32
}

// textIndex is one user's inverted index: every item's words, split and
// folded as FTS5's unicode61 tokenizer with remove_diacritics does, with
// the statistics BM25 needs (item count, lengths, document frequencies).
// It is read and extended under its slot's mutex only.
type textIndex struct {
	added, changed int64 // memory_item_revisions when read
	maxID          int64 // highest id held (0: none)
	ids            []int64
	convs          []string // conversation ("" for none) per item
	refs           []string // source per item
	lens           []int32  // words per item
	total          int64    // words of all items
	postings       map[string][]posting
	bytes          int // roughly what the index holds in memory
	// scores and touched are scratch space for one search at a time.
	scores  []float64
	touched []int32
}

// addDoc indexes one item.
func (x *textIndex) addDoc(id int64, conv, ref string, text []byte) {
	doc := int32(len(x.ids))
	x.ids = append(x.ids, id)
	x.convs = append(x.convs, conv)
	x.refs = append(x.refs, ref)
	x.maxID = max(x.maxID, id)
	counts := map[string]int32{}
	words := int32(0)
	forEachWord(text, func(w []byte) {
		words++
		counts[string(w)]++
	})
	for w, tf := range counts {
		ps, ok := x.postings[w]
		if !ok {
			x.bytes += len(w) + 64
		}
		x.postings[w] = append(ps, posting{doc: doc, tf: tf})
		x.bytes += 8
	}
	x.lens = append(x.lens, words)
	x.total += int64(words)
	x.bytes += 8 + 4 + 16 + len(conv) + 16 + len(ref)
}

// forEachWord calls fn with each word of text, lower-cased and stripped of
// the diacritics foldRune knows; w is reused between calls.
func forEachWord(text []byte, fn func(w []byte)) {
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
func (x *textIndex) search(terms []string, related []memory.RelatedTerm, limit int, keep func(doc int32) bool) []scored {
	n := float64(len(x.ids))
	if n == 0 || limit <= 0 {
		return nil
	}
	common := func(ps []posting) bool {
		return 2*len(ps) >= len(x.ids) && len(ps) > memory.CommonTermMinDF
	}
	idf := func(ps []posting) float64 {
		df := float64(len(ps))
		return max(math.Log((n-df+0.5)/(df+0.5)), 1e-6)
	}
	var all, selective []bm25Term
	seen := make(map[string]bool, len(terms))
	for _, t := range terms {
		f := foldWord(t)
		if seen[f] {
			continue
		}
		seen[f] = true
		ps := x.postings[f]
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
		f := foldTerm(r.Term)
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
		ps := x.postings[f]
		if len(ps) > 0 && !(memory.RelatedCommonDivisor*len(ps) >= len(x.ids) && len(ps) > memory.CommonTermMinDF) {
			all = append(all, bm25Term{postings: ps, idf: idf(ps) * weights[f]})
		}
	}
	if len(all) == 0 {
		return nil
	}
	if cap(x.scores) < len(x.ids) {
		x.scores = make([]float64, len(x.ids))
	}
	scores := x.scores[:len(x.ids)]
	touched := x.touched[:0]
	avg := float64(x.total) / n
	for _, t := range all {
		for _, p := range t.postings {
			if scores[p.doc] == 0 {
				touched = append(touched, p.doc)
			}
			tf := float64(p.tf)
			scores[p.doc] += t.idf * tf * (memory.BM25K1 + 1) /
				(tf + memory.BM25K1*(1-memory.BM25B+memory.BM25B*float64(x.lens[p.doc])/avg))
		}
	}
	top := make(topK, 0, limit+1)
	for _, d := range touched {
		if keep(d) {
			top.offer(scored{id: x.ids[d], score: scores[d]}, limit)
		}
		scores[d] = 0
	}
	x.touched = touched[:0]
	return top.sorted()
}

// textCache keeps users' full-text indexes in memory (model and dims of
// their keys unused), least recently used evicted first past max bytes. A
// slot's mutex serializes refreshes and searches of its index.
type textCache = userCache[*textIndex]

// size is roughly what x holds in memory, in bytes.
func (x *textIndex) size() int { return x.bytes }

// withTextIndex runs fn on the user's index, current as of a moment during
// the call (extended with the rows added since it was read when only
// inserts happened, else read again whole), holding the slot's mutex. It
// returns errTooBig for a user too large to index in memory.
func (s *Store) withTextIndex(ctx context.Context, tenant, user string, fn func(x *textIndex)) error {
	sl := s.texts.slot(vecKey{tenant: tenant, user: user})
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.tooBig {
		return errTooBig
	}
	// The revisions are read before the rows: rows read later can only be
	// newer than the revisions say, and the next search then reads again.
	var added, changed int64
	err := s.reads.QueryRowContext(ctx, `SELECT added, changed FROM memory_item_revisions
		WHERE tenant = ? AND user_id = ?`, tenant, user).Scan(&added, &changed)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read item revisions: %w", err)
	}
	x := sl.val
	if x == nil || x.changed != changed || x.added != added {
		if x == nil || x.changed != changed {
			x = &textIndex{postings: map[string][]posting{}}
		}
		x.added, x.changed = added, changed
		if err := s.loadTexts(ctx, tenant, user, x, s.texts.max/4); err != nil {
			sl.tooBig = errors.Is(err, errTooBig)
			s.texts.publish(sl, nil)
			return err
		}
		s.texts.publish(sl, x)
	}
	fn(x)
	return nil
}

// loadTexts indexes into x the user's items with ids above x.maxID; an
// index past limit bytes fails with errTooBig.
func (s *Store) loadTexts(ctx context.Context, tenant, user string, x *textIndex, limit int) error {
	rows, err := s.reads.QueryContext(ctx, `SELECT id, COALESCE(conversation, ''), source, text FROM memory_items
		WHERE tenant = ? AND user_id = ? AND id > ? ORDER BY id`, tenant, user, x.maxID)
	if err != nil {
		return fmt.Errorf("load texts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var conv, ref string
		var text sql.RawBytes
		if err := rows.Scan(&id, &conv, &ref, &text); err != nil {
			return fmt.Errorf("load texts: %w", err)
		}
		x.addDoc(id, conv, ref, text)
		if x.bytes > limit {
			return errTooBig
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load texts: %w", err)
	}
	return nil
}

// CommonTerms returns those of terms (words, as memory.QueryTerms gives
// them) found in at least minDF of the user's items and at least frac of
// them, in the order given: the words a query shares with most of the
// user's memory (speaker names, common words), which recall leaves out of
// its vector query.
func (s *Store) CommonTerms(ctx context.Context, tenant, user string, terms []string, minDF int, frac float64) ([]string, error) {
	if len(terms) == 0 {
		return nil, nil
	}
	var out []string
	err := s.withTextIndex(ctx, tenant, user, func(x *textIndex) {
		for _, t := range terms {
			df := len(x.postings[foldWord(t)])
			if df > 0 && df >= minDF && float64(df) >= frac*float64(len(x.ids)) {
				out = append(out, t)
			}
		}
	})
	switch {
	case errors.Is(err, errTooBig):
		return nil, nil // no statistics: nothing is known to be common
	case err != nil:
		return nil, fmt.Errorf("common terms: %w", err)
	}
	return out, nil
}
