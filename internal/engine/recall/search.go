package recall

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/ranking"
	"github.com/memgate/memgate/internal/telemetry"
)

// ItemSearcher is the ranked retrieval a store provides. Both calls are
// scoped to q.Tenant and q.User inside the query. The slices they return
// are the caller's to change (the items' Embedding arrays are not: see
// memory.Item).
type ItemSearcher interface {
	SearchVector(ctx context.Context, q memory.ItemQuery) ([]memory.Item, error)
	SearchText(ctx context.Context, q memory.ItemQuery) ([]memory.Item, error)
}

// TermStats is a store's full-text statistics: which of a query's words
// most of a user's items hold. A Searcher given them (SearchOptions.Stats)
// leaves those words out of the text it embeds for the vector ranking.
type TermStats interface {
	// CommonTerms returns those of terms found in at least minDF of the
	// user's items and at least frac of them.
	// them, as of rev (see SearchQuery.Revisions).
	CommonTerms(ctx context.Context, rev *memory.Revisions, tenant, user string, terms []string, minDF int, frac float64) ([]string, error)
}

// Common words, for the vector query: a word in at least commonFrac of a
// user's items, and in at least commonMinDF of them, says little about
// which passage a query wants (a speaker's name, "really", "today"), yet
// in a short text it dominates a hashed embedding.
const (
	commonMinDF = 20
	commonFrac  = 0.1
)

// maxExpandedTerms bounds how many of a query's words are expanded.
const maxExpandedTerms = 16

// maxQueryTerms bounds the query words the vector query keeps.
const maxQueryTerms = 64

// rrfK is the reciprocal rank fusion constant: an item at rank r (from 1) of
// a list scores 1/(rrfK+r).
const rrfK = 60

// dupCosine is the similarity above which two passages count as the same.
const dupCosine = 0.95

// SearchOptions tune a Searcher.
type SearchOptions struct {
	// TopK is how many passages a search returns at most (default 5).
	TopK int
	// MinSimilarity drops vector matches below this cosine similarity.
	MinSimilarity float64
	// RecencyHalfLife halves a passage's score per this much age; 0 disables.
	RecencyHalfLife time.Duration
	// Expander, when set, widens the full-text search with the words
	// related to the query's (memory.ItemQuery.Related).
	Expander *Expander
	// WholeQuery embeds the question as asked rather than its rarer words
	// (see Search): for a sentence encoder, which reads words in context
	// and needs the rest of the sentence to tell what is asked. The words
	// most of the user's items hold are still left out.
	WholeQuery bool
	// Stats are the store's term statistics; nil: the store keeps none,
	// and every word of a query is embedded.
	Stats TermStats
}

// Searcher is hybrid search over a user's memory items: vector and
// full-text rankings fused by reciprocal rank fusion, filtered and
// re-weighted. It is safe for concurrent use.
type Searcher struct {
	store ItemSearcher
	stats TermStats // opts.Stats: nil when the store keeps none
	emb   OwnedEmbedder
	opts  SearchOptions
	// scratch holds *searchScratch: the working space of searches, reused.
	scratch sync.Pool
}

// NewSearcher returns a Searcher over store embedding queries with emb.
// With opts.Stats, the words most of a user's items hold are left out of
// the vector query (see Search).
func NewSearcher(store ItemSearcher, emb Embedder, opts SearchOptions) *Searcher {
	if opts.TopK <= 0 {
		opts.TopK = 5
	}
	return &Searcher{store: store, stats: opts.Stats, emb: owning(emb), opts: opts}
}

// SearchQuery is one hybrid search.
type SearchQuery struct {
	Tenant, User string
	// Conversation, when set, restricts the search to one conversation.
	Conversation string
	// Text is the query.
	Text string
	// ExcludeRefs are refs never returned.
	ExcludeRefs []string
	// TopK overrides the Searcher's TopK when positive.
	TopK int
	// Now is when recency and the query's time words ("last week", "in
	// May") are measured from (zero: time.Now()).
	Now time.Time
	// Revisions are the user's revision counters the request read once
	// (nil: the store reads them), which the store's reads are current as
	// of.
	Revisions *memory.Revisions
	// EmbedBy, when not zero, is when the search stops waiting for its
	// embeddings (see Search).
	EmbedBy time.Time
}

// Search returns the user's best passages for q.Text, best first, each with
// Score in (0, 1]. Candidates come from the store's vector ranking (embedded
// with the Searcher's embedder; matches below MinSimilarity dropped) and
// its full-text ranking (BM25: words most items hold weigh little; with an
// Expander, the words related to the query's count too, at a reduced
// weight: see Expander.Related and memory.RelatedTerm), fused
// by reciprocal rank fusion (k = 60); then a second vector ranking, for the
// query's vector moved towards the best candidates' (pseudo-relevance
// feedback: see feedbackQuery; matches below MinSimilarity dropped), is
// fused with the two at half their weight, normalised so an item first in
// every list scores 1 (without a query vector, or a candidate vector, the
// first two alone, normalised so an item first in both scores 1); the score is then halved per RecencyHalfLife of age
// (since it was said), and weighed by the query's time words (see
// parseWhen: a passage said in the window the query names counts double, a
// query about recent events favours newer passages mildly); passages with the same normalised text or a cosine
// similarity above 0.95 to a better one are dropped; at most TopK remain.
// An empty query returns nothing.
//
// The vector query is the query's words without stopwords and, when the
// store keeps term statistics, without the words found in at least 10% of
// the user's items (and 20 of them): a speaker's name in every turn would
// otherwise make "Thanks, Mel!" the nearest passage to any question that
// names Mel. A query of nothing but such words is embedded whole. With
// SearchOptions.WholeQuery the question is embedded as asked, without
// those common words alone (see withoutWords).
//
// A query embedding that comes after q.EmbedBy (ErrEmbeddingLate) leaves
// the full-text ranking alone; results without a vector that come too late
// are deduplicated by text alone.
func (s *Searcher) Search(ctx context.Context, q SearchQuery) ([]memory.Item, error) {
	items, _, err := s.search(ctx, q)
	return items, err
}

// search is Search, also reporting whether an embedding came too late
// (lexical: the passages were ranked or deduplicated without it).
func (s *Searcher) search(ctx context.Context, q SearchQuery) (_ []memory.Item, lexical bool, _ error) {
	text := strings.TrimSpace(q.Text)
	if text == "" {
		return nil, false, nil
	}
	topK := s.opts.TopK
	if q.TopK > 0 {
		topK = q.TopK
	}
	// The query's words, once: the first maxExpandedTerms are expanded
	// with related words, all of them make the vector query (vectorText).
	terms := memory.QueryTerms(text, maxQueryTerms)
	iq := memory.ItemQuery{
		Tenant: q.Tenant, User: q.User, Conversation: q.Conversation,
		ExcludeRefs: q.ExcludeRefs,
		Model:       s.emb.Model(), Dims: s.emb.Dims(),
		Text:      text,
		Related:   s.opts.Expander.Related(terms[:min(len(terms), maxExpandedTerms)]),
		Limit:     max(20, topK+topK/2),
		Revisions: q.Revisions,
	}
	// The full-text ranking needs neither the query's term statistics nor
	// its embedding: it runs while they are fetched and computed, so a
	// remote store costs the round trips of the vector query alone.
	var (
		byText  []memory.Item
		textErr error
		done    = make(chan struct{})
	)
	textQuery := iq
	go func() {
		defer close(done)
		byText, textErr = s.store.SearchText(ctx, textQuery)
	}()
	vecText, err := s.vectorText(ctx, q.Revisions, q.Tenant, q.User, text, terms)
	if err != nil {
		<-done
		return nil, false, err
	}
	ectx, span := telemetry.Start(ctx, "memory.embed")
	vecs, err := s.emb.EmbedOwned(ectx, ownedBy(q.Tenant, q.User, vecText), q.EmbedBy)
	telemetry.End(span, err)
	// A query embedding that comes too late leaves the full-text ranking
	// alone.
	lexical = errors.Is(err, ErrEmbeddingLate)
	if err != nil && !lexical {
		<-done
		return nil, false, fmt.Errorf("embed query: %w", err)
	}
	if !lexical {
		iq.Embedding = vecs[0]
	}
	var byVec []memory.Item
	err = nil
	if !lexical {
		byVec, err = s.store.SearchVector(ctx, iq)
	}
	<-done
	if err != nil {
		return nil, false, fmt.Errorf("vector search: %w", err)
	}
	if textErr != nil {
		return nil, false, fmt.Errorf("text search: %w", textErr)
	}
	kept := s.similar(byVec)
	now := q.Now
	if now.IsZero() {
		now = time.Now()
	}
	// The candidates point into kept and byText: items are moved only
	// once, into the result.
	scr := s.getScratch()
	defer s.putScratch(scr)
	cands := scr.fuse(kept, byText)
	if fq := feedbackQuery(iq.Embedding, cands); fq != nil {
		fiq := iq
		fiq.Embedding = fq
		// The feedback ranking only adds to what the first two found: when
		// its search fails (a store's error, the request's deadline), the
		// recall goes on with them alone instead of failing.
		if byFeedback, err := s.store.SearchVector(ctx, fiq); err == nil {
			scr.resetFuse()
			cands = scr.fuseWeighted([]float64{1, 1, feedbackWeight}, kept, byText, s.similar(byFeedback))
		}
	}
	excluded := make(map[string]bool, len(q.ExcludeRefs))
	for _, r := range q.ExcludeRefs {
		excluded[r] = true
	}
	when := parseWhen(text, now)
	out := cands[:0]
	for _, c := range cands {
		if excluded[c.it.Ref] {
			continue
		}
		said := saidAt(*c.it)
		c.score *= RecencyWeight(now.Sub(said), s.opts.RecencyHalfLife) * when.weight(said, now)
		out = append(out, c)
	}
	sortCands(out)
	items, late, err := s.dedup(ctx, scr, q, out, topK)
	return items, lexical || late, err
}

// maxResultEmbeds bounds the text-only hits one search embeds: the tail
// of a pasted document (past embeddedRuns) is stored without vectors, and
// a query matching many of its chunks would otherwise embed up to the
// candidate lists' length on the request's behalf (with the encoder,
// seconds of a core a request, and every encoder slot taken).
const maxResultEmbeds = 8

// vectorText is the text the vector query embeds for text, whose words
// (memory.QueryTerms, up to maxQueryTerms) are terms (see Search).
func (s *Searcher) vectorText(ctx context.Context, rev *memory.Revisions, tenant, user, text string, terms []string) (string, error) {
	if len(terms) == 0 || (s.opts.WholeQuery && s.stats == nil) {
		return text, nil
	}
	if s.stats != nil {
		common, err := s.stats.CommonTerms(ctx, rev, tenant, user, terms, commonMinDF, commonFrac)
		if err != nil {
			return "", fmt.Errorf("query term statistics: %w", err)
		}
		if s.opts.WholeQuery {
			return withoutWords(text, common), nil
		}
		if len(common) > 0 {
			kept := terms[:0:0]
			for _, t := range terms {
				if !slices.Contains(common, t) {
					kept = append(kept, t)
				}
			}
			if len(kept) == 0 {
				return text, nil
			}
			terms = kept
		}
	}
	if memory.Stopword(terms[0]) { // nothing but stopwords
		return text, nil
	}
	return strings.Join(terms, " "), nil
}

// factQuery is the text facts are ranked against for query: with
// WholeQuery, the text the vector search embeds (one encoder call, shared
// by the two: see Cached), else query itself.
func (s *Searcher) factQuery(ctx context.Context, rev *memory.Revisions, tenant, user, query string) string {
	text := strings.TrimSpace(query)
	if !s.opts.WholeQuery || text == "" {
		return query
	}
	v, err := s.vectorText(ctx, rev, tenant, user, text, memory.QueryTerms(text, maxQueryTerms))
	if err != nil {
		return query
	}
	return v
}

// withoutWords returns text without the words (lower case, as
// memory.QueryTerms gives them) of drop, keeping the rest as written: the
// question as asked, for a sentence encoder, without the words most of a
// user's items hold (a speaker's name). A possessive "'s" goes with its
// word, and a contraction's tail is never dropped on its own. When nothing
// but dropped words and stopwords would be left, text is returned whole.
func withoutWords(text string, drop []string) string {
	if len(drop) == 0 {
		return text
	}
	var b strings.Builder
	b.Grow(len(text))
	kept := false // a word that is neither dropped nor a stopword is left
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRuneInString(text[i:])
		if !memory.IsWordRune(r) {
			b.WriteString(text[i : i+n])
			i += n
			continue
		}
		j := i
		for j < len(text) {
			r, n := utf8.DecodeRuneInString(text[j:])
			if !memory.IsWordRune(r) {
				break
			}
			j += n
		}
		w := strings.ToLower(text[i:j])
		// A contraction's tail ("s" of "what's", "t" of "don't") stays
		// with its word, however common.
		tail := strings.HasSuffix(text[:i], "'") || strings.HasSuffix(text[:i], "’")
		if tail || !slices.Contains(drop, w) {
			b.WriteString(text[i:j])
			kept = kept || !memory.Stopword(w)
			i = j
			continue
		}
		// A possessive ("Maria's", "Maria’s") goes with the name.
		for _, pos := range []string{"'s", "’s"} {
			rest := text[j:]
			if len(rest) < len(pos) || !strings.EqualFold(rest[:len(pos)], pos) {
				continue
			}
			if next, _ := utf8.DecodeRuneInString(rest[len(pos):]); len(rest) == len(pos) || !memory.IsWordRune(next) {
				j += len(pos)
				break
			}
		}
		i = j
	}
	if !kept {
		return text
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// similar returns the items of a vector ranking (a store's fresh slice,
// filtered in place) whose similarity is at least MinSimilarity.
func (s *Searcher) similar(byVec []memory.Item) []memory.Item {
	kept := byVec[:0]
	for _, it := range byVec {
		if it.Score >= s.opts.MinSimilarity {
			kept = append(kept, it)
		}
	}
	return kept
}

// feedbackDocs is how many of the best candidates of the first fusion
// make the feedback query (see feedbackQuery).
const feedbackDocs = 8

// feedbackWeight is the feedback ranking's weight in the fusion, the
// first two rankings' being 1: it finds turns the question's words and
// vector miss, but ranks them after what those find. On LoCoMo
// (conversations 1-3, 4,000 tokens) weight 1 moved 32 evidence turns for
// a net gain of 2, weight 0.5 a net gain of 5.
const feedbackWeight = 0.5

// feedbackQuery returns the query vector of a second vector ranking, by
// pseudo-relevance feedback (Rocchio): the query's unit vector plus the
// mean of the unit vectors of the feedbackDocs best candidates (cands,
// best first) embedded like it, so the second ranking finds what the best
// hits are about, not only what the question's words are ("What
// activities does she do with her family?" → the turns near the camping
// and the pottery the first hits told of). No encoder call: the
// candidates' stored vectors are averaged. It returns nil without a
// query vector or a candidate with one.
func feedbackQuery(q []float32, cands []cand) []float32 {
	qn := ranking.Norm(q)
	if qn == 0 {
		return nil
	}
	sum := make([]float64, len(q))
	n := 0
	for _, c := range cands {
		if n == feedbackDocs {
			break
		}
		v := c.it.Embedding
		vn := ranking.Norm(v)
		if len(v) != len(q) || vn == 0 {
			continue
		}
		for i, x := range v {
			sum[i] += float64(x) / vn
		}
		n++
	}
	if n == 0 {
		return nil
	}
	out := make([]float32, len(q))
	for i, x := range q {
		out[i] = float32(float64(x)/qn + sum[i]/float64(n))
	}
	return out
}

// saidAt is when an item's source was said: SaidAt, else CreatedAt.
func saidAt(it memory.Item) time.Time {
	if !it.SaidAt.IsZero() {
		return it.SaidAt
	}
	return it.CreatedAt
}

// cand is a search candidate: an item in one of the rankings (fields of
// the first occurrence) and its score so far. Candidates are sorted and
// filtered in place of the items, a tenth of their size.
type cand struct {
	it    *memory.Item
	score float64
}

// searchScratch is the working space of one search at a time: fuse's and
// dedup's.
type searchScratch struct {
	byRef   map[string]int32 // see fuse
	sameRef []int32
	cands   []cand
	dedupScratch
}

func newSearchScratch() *searchScratch {
	return &searchScratch{byRef: map[string]int32{}, dedupScratch: *newDedupScratch(0)}
}

// getScratch returns a searchScratch for one search, put back with
// putScratch once the search's result is built.
func (s *Searcher) getScratch() *searchScratch {
	if scr, ok := s.scratch.Get().(*searchScratch); ok {
		return scr
	}
	return newSearchScratch()
}

// resetFuse forgets a fusion, for another over the same scratch.
func (scr *searchScratch) resetFuse() {
	clear(scr.byRef)
	clear(scr.cands)
	scr.sameRef, scr.cands = scr.sameRef[:0], scr.cands[:0]
}

// putScratch empties scr, forgetting the items it pointed to, and keeps it
// for another search.
func (s *Searcher) putScratch(scr *searchScratch) {
	clear(scr.byRef)
	clear(scr.cands)
	scr.sameRef, scr.cands = scr.sameRef[:0], scr.cands[:0]
	scr.dedupScratch.reset()
	s.scratch.Put(scr)
}

// fuse merges rankings by reciprocal rank fusion, in scr's space: an item
// scores the sum over the lists it appears in of 1/(60+rank), ranks from
// 1, divided by n/61 for n lists (at least 2), so an item first in every
// list scores 1. Items are the same when kind, ref and chunk are; a candidate
// points at the first occurrence, whose embedding, when nil, is set in
// lists to that of a later one. The result is best first.
func (scr *searchScratch) fuse(lists ...[]memory.Item) []cand {
	return scr.fuseWeighted(nil, lists...)
}

// fuseWeighted is fuse with list i's reciprocal ranks times weights[i]
// (nil: all 1), normalised by the sum of the weights (at least 2).
func (scr *searchScratch) fuseWeighted(weights []float64, lists ...[]memory.Item) []cand {
	weight := func(i int) float64 {
		if weights == nil {
			return 1
		}
		return weights[i]
	}
	total := 0.0
	for i := range lists {
		total += weight(i)
	}
	best := max(2, total) / (rrfK + 1)
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	if n == 0 {
		return nil
	}
	// The candidates by ref: byRef[ref] is the last one with that ref,
	// sameRef[i] the one before candidate i (-1: none), so a lookup
	// hashes one short string and compares kind and chunk along the chain.
	byRef := scr.byRef
	sameRef := scr.sameRef[:0]
	out := slices.Grow(scr.cands[:0], n)
	for li, l := range lists {
		for rank := range l {
			it := &l[rank]
			add := weight(li) / float64(rrfK+rank+1) / best
			head, ok := byRef[it.Ref]
			i := head
			if !ok {
				head, i = -1, -1
			}
			for i >= 0 && (out[i].it.Kind != it.Kind || out[i].it.Chunk != it.Chunk) {
				i = sameRef[i]
			}
			if i >= 0 {
				out[i].score += add
				if out[i].it.Embedding == nil {
					out[i].it.Embedding = it.Embedding
				}
				continue
			}
			byRef[it.Ref] = int32(len(out))
			sameRef = append(sameRef, head)
			out = append(out, cand{it: it, score: add})
		}
	}
	sortCands(out)
	scr.sameRef, scr.cands = sameRef, out
	return out
}

// sortCands orders candidates best first, newer first on ties, then by
// ID, keeping the order of equal candidates (slices.SortStableFunc: the
// order sort.SliceStable gives). Scores that are not numbers order like
// equal ones.
func sortCands(cands []cand) {
	slices.SortStableFunc(cands, func(a, b cand) int {
		if a.score != b.score {
			switch {
			case a.score > b.score:
				return -1
			case a.score < b.score:
				return 1
			}
			return 0 // NaN
		}
		if c := b.it.CreatedAt.Compare(a.it.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.it.ID, b.it.ID)
	})
}

// RecencyWeight is the factor a passage of the given age is scored by:
// 0.5^(age/halfLife), 1 for halfLife <= 0 or a non-positive age.
func RecencyWeight(age, halfLife time.Duration) float64 {
	if halfLife <= 0 || age <= 0 {
		return 1
	}
	return math.Pow(0.5, float64(age)/float64(halfLife))
}

// dedup keeps, walking cands best first, those whose normalised text
// differs from every kept one and whose vector is within dupCosine of
// none, until topK are kept. The best maxResultEmbeds candidates without
// a vector (text-only hits) are embedded here on q's user's behalf,
// waiting until q.EmbedBy at most (when not zero): past it (late) they are
// deduplicated by text alone, as the others without a vector always are.
func (s *Searcher) dedup(ctx context.Context, scr *searchScratch, q SearchQuery, cands []cand, topK int) (_ []memory.Item, late bool, _ error) {
	var missing []string
	var at []int
	for i, c := range cands {
		switch {
		case len(c.it.Embedding) == s.emb.Dims():
		case len(missing) == maxResultEmbeds:
			c.it.Embedding = nil // deduplicated by text alone
		default:
			missing = append(missing, c.it.Text)
			at = append(at, i)
		}
	}
	if len(missing) > 0 {
		vecs, err := s.emb.EmbedOwned(ctx, ownedBy(q.Tenant, q.User, missing...), q.EmbedBy)
		if errors.Is(err, ErrEmbeddingLate) {
			for _, c := range cands {
				c.it.Embedding = nil // dedup by text alone
			}
			return scr.dedupScratch.dedup(cands, topK), true, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("embed results: %w", err)
		}
		for j, i := range at {
			cands[i].it.Embedding = vecs[j]
		}
	}
	return scr.dedupScratch.dedup(cands, topK), false, nil
}
