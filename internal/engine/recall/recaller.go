package recall

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// FactReader lists a user's facts.
type FactReader interface {
	// Facts returns the user's current facts (history: superseded and
	// expired ones too), most recently updated first.
	Facts(ctx context.Context, tenant, user string, now time.Time, history bool) ([]memory.Fact, error)
}

// RecallOptions tune a Recaller.
type RecallOptions struct {
	// CrossConversation lets recall search the user's other conversations;
	// a request can only narrow it (RecallQuery.CrossConversation false).
	CrossConversation bool
	// FactsMax caps the facts returned by Recall (0: none).
	FactsMax int
	// FactRelevance is the cosine similarity from which a fact counts as
	// relevant to the query; below it, facts rank by mentions and recency.
	FactRelevance float64
	// MaxPassages is how many passages Recall returns at least as its
	// limit (default 64; a query's budget may raise it, one passage per 64
	// tokens up to 256): the prompt's recall share, not this number,
	// decides how many are shown (the assembler packs them best first
	// until it is full).
	MaxPassages int
	// ContextTurns is how many turns before and after a recalled turn come
	// with it (default 1: the question before an answer, the answer after
	// a question); negative brings none.
	ContextTurns int
	// Around reads the turns around recalled messages; nil: the store
	// keeps no conversations, and recalled turns come alone.
	Around ContextReader
}

// defaultMaxPassages is RecallOptions.MaxPassages when unset.
const defaultMaxPassages = 64

const (
	// budgetPerPassage is the prompt budget, in tokens, for which recall
	// returns one passage beyond MaxPassages: about what a recalled turn
	// with the turns around it costs.
	budgetPerPassage = 64
	// maxBudgetPassages bounds the passages a large budget asks for (each
	// costs a read of the turns around it).
	maxBudgetPassages = 256
)

// passages returns how many passages a recall within a prompt budget of
// budget tokens returns at most: MaxPassages, or more for a budget that can
// show more (the assembler packs them best first until the recall share is
// full, so a fixed count would leave a large budget unused).
func (r *Recaller) passages(budget int) int {
	return max(r.opts.MaxPassages, min(budget/budgetPerPassage, maxBudgetPassages))
}

// Recaller answers recall queries: the user's current facts and passages
// from their earlier messages, summaries and facts. It is safe for
// concurrent use.
type Recaller struct {
	facts   FactReader
	context ContextReader // opts.Around: nil when the store keeps no conversations
	search  *Searcher
	emb     OwnedEmbedder
	opts    RecallOptions
}

// NewRecaller returns a Recaller reading facts from facts and passages
// through search, ranking facts with emb (the searcher's embedder). With
// opts.Around, recalled turns come with the turns around them
// (RecallOptions.ContextTurns).
func NewRecaller(facts FactReader, search *Searcher, emb Embedder, opts RecallOptions) *Recaller {
	if opts.MaxPassages <= 0 {
		opts.MaxPassages = defaultMaxPassages
	}
	if opts.ContextTurns == 0 {
		opts.ContextTurns = 1
	}
	return &Recaller{facts: facts, context: opts.Around, search: search, emb: owning(emb), opts: opts}
}

// Recall returns what q's user said before that bears on q.Text.
//
// Facts: the user's current facts (never superseded or expired ones — the
// store filters them at q.Now), ranked by relevance to q.Text (cosine of
// the embedded fact and query, the query embedded as the vector search
// embeds it with SearchOptions.WholeQuery; below FactRelevance counts as
// unrelated),
// then pinned before unpinned, pins by recency and other facts by
// mentions, then recency; at most FactsMax in all. A relevant fact thus
// outranks an unrelated pin (the assembler shows pins within their own
// share, the most relevant and most recent first).
//
// Items: up to MaxPassages passages from Searcher.Search, each recalled
// turn with ContextTurns turns before and after it, merged into one
// passage when they touch (see expand), best first by their score weighed
// by how much of q.Text each passage shows (see rankPassages); scoped to q.Tenant and q.User, to
// q.Conversation unless both the Recaller's and the query's
// CrossConversation are on (with either off and no q.Conversation, no
// passages), never with a Ref in q.ExcludeRefs. Fact items
// are left out (the facts come in Facts, and a superseded fact's item must
// never resurface), and so are summaries of q.Conversation (the assembler
// injects its latest summary itself).
func (r *Recaller) Recall(ctx context.Context, q memory.RecallQuery) (memory.Recalled, error) {
	now := q.Now
	if now.IsZero() {
		now = time.Now()
	}
	// The searches and the turns around their hits are current as of
	// q.Revisions, the one read of the user's revision counters the
	// request made (nil: each reads its own).
	sq := SearchQuery{Tenant: q.Tenant, User: q.User, Text: q.Text, ExcludeRefs: q.ExcludeRefs, Now: now,
		TopK: r.passages(q.Budget), Revisions: q.Revisions, EmbedBy: q.EmbedBy}
	search := true
	if !(r.opts.CrossConversation && q.CrossConversation) {
		search = q.Conversation != "" // else no conversation to stay within
		sq.Conversation = q.Conversation
	}
	// Facts and passages are independent: fetch them at once, so a remote
	// store costs the slower of the two, not their sum. The passages, the
	// longer of the two, are searched on this goroutine, which runs now:
	// the facts wait for a free CPU instead of the search.
	var (
		out       memory.Recalled
		factsErr  error
		factsLate bool
		done      = make(chan struct{})
	)
	go func() {
		defer close(done)
		facts, err := r.facts.Facts(ctx, q.Tenant, q.User, now, false)
		if err != nil {
			factsErr = fmt.Errorf("recall facts: %w", err)
			return
		}
		out.Facts, factsLate, factsErr = r.rankFacts(ctx, q.Tenant, q.User, facts, r.search.factQuery(ctx, q.Revisions, q.Tenant, q.User, q.Text), now, q.EmbedBy)
	}()
	var (
		items      []memory.Item
		searchLate bool
		searchErr  error
	)
	if search {
		items, searchLate, searchErr = r.search.search(ctx, sq)
		if searchErr == nil && r.context != nil && r.opts.ContextTurns > 0 {
			mt := newQueryMatcher(q.Text)
			items, searchErr = expandWith(ctx, r.context, q.Revisions, q.Tenant, q.User, items, r.opts.ContextTurns, mt)
			rankPassages(items, mt)
		}
	}
	<-done
	if factsErr != nil {
		return memory.Recalled{}, factsErr
	}
	if searchErr != nil {
		return memory.Recalled{}, fmt.Errorf("recall passages: %w", searchErr)
	}
	for _, it := range items {
		if it.Kind == KindFact || (it.Kind == KindSummary && it.Conversation == q.Conversation) {
			continue
		}
		it.Embedding = nil
		out.Items = append(out.Items, it)
	}
	out.Lexical = searchLate || factsLate
	return out, nil
}

// Search returns the user's best passages for query across all their
// conversations, for the management API: at most topK (0: the configured
// top_k), best first, with fact items only for facts still current.
func (r *Recaller) Search(ctx context.Context, tenant, user, query string, topK int) ([]memory.Item, error) {
	return r.SearchIn(ctx, tenant, user, "", query, topK)
}

// SearchIn is Search within one conversation of the user's ("": all of them).
func (r *Recaller) SearchIn(ctx context.Context, tenant, user, conversation, query string, topK int) ([]memory.Item, error) {
	now := time.Now()
	items, err := r.search.Search(ctx, SearchQuery{Tenant: tenant, User: user, Conversation: conversation, Text: query, TopK: topK, Now: now})
	if err != nil {
		return nil, err
	}
	var current map[string]bool
	out := make([]memory.Item, 0, len(items))
	for _, it := range items {
		if it.Kind == KindFact {
			if current == nil {
				facts, err := r.facts.Facts(ctx, tenant, user, now, false)
				if err != nil {
					return nil, fmt.Errorf("search facts: %w", err)
				}
				current = make(map[string]bool, len(facts))
				for _, f := range facts {
					current[strconv.FormatInt(f.ID, 10)] = true
				}
			}
			if !current[it.Ref] {
				continue
			}
		}
		it.Embedding = nil
		out = append(out, it)
	}
	return out, nil
}

// FactText is how a fact is embedded and indexed: "type key: value".
func FactText(f memory.Fact) string {
	return string(f.Type) + " " + strings.ReplaceAll(f.Key, "_", " ") + ": " + f.Value
}

// rankFacts orders facts (see Recall) and caps them at FactsMax, waiting
// for the embeddings, on tenant's user's behalf, until by at most (when
// not zero): past it (late) the facts rank without relevance to the query.
func (r *Recaller) rankFacts(ctx context.Context, tenant, user string, facts []memory.Fact, query string, now, by time.Time) (_ []memory.Fact, late bool, _ error) {
	if r.opts.FactsMax <= 0 || len(facts) == 0 {
		return nil, false, nil
	}
	rel := make([]float64, len(facts))
	if strings.TrimSpace(query) != "" {
		texts := make([]string, 0, len(facts)+1)
		texts = append(texts, query)
		for _, f := range facts {
			texts = append(texts, FactText(f))
		}
		vecs, err := r.emb.EmbedOwned(ctx, ownedBy(tenant, user, texts...), by)
		late = errors.Is(err, ErrEmbeddingLate)
		if err != nil && !late {
			return nil, false, fmt.Errorf("embed facts: %w", err)
		}
		// A late query embedding ranks the facts without relevance.
		for i := 0; err == nil && i < len(facts); i++ {
			if c := Cosine(vecs[0], vecs[i+1]); c >= r.opts.FactRelevance {
				rel[i] = c
			}
		}
	}
	order := make([]int, len(facts))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		fa, fb := facts[order[a]], facts[order[b]]
		if ra, rb := rel[order[a]], rel[order[b]]; ra != rb {
			return ra > rb
		}
		if fa.Pinned != fb.Pinned {
			return fa.Pinned
		}
		if !fa.Pinned && fa.Mentions != fb.Mentions {
			return fa.Mentions > fb.Mentions
		}
		return fa.UpdatedAt.After(fb.UpdatedAt)
	})
	out := make([]memory.Fact, 0, min(len(facts), r.opts.FactsMax))
	for _, i := range order {
		if len(out) == r.opts.FactsMax {
			break
		}
		if facts[i].Current(now) {
			out = append(out, facts[i])
		}
	}
	return out, late, nil
}

// QueryText is the recall query for a request's messages: the newest user
// message's text, preceded by the assistant message before it (its answer,
// without the reasoning it opened with: memory.Message.Answer) when the user
// message is short (under 8 words, e.g. "and in Porto?", "yes, do that"),
// so a follow-up still finds its topic. System, developer and tool messages
// are skipped. It returns "" when there is no user message.
func QueryText(msgs []memory.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		text := strings.TrimSpace(msgs[i].Content)
		if len(strings.Fields(text)) >= shortQueryWords {
			return text
		}
		for j := i - 1; j >= 0; j-- {
			if msgs[j].Role == "assistant" {
				if prev := strings.TrimSpace(msgs[j].Answer()); prev != "" {
					return prev + "\n" + text
				}
				break
			}
			if msgs[j].Role == "user" {
				break
			}
		}
		return text
	}
	return ""
}

// shortQueryWords: a user message with fewer words is "short" (QueryText).
const shortQueryWords = 8
