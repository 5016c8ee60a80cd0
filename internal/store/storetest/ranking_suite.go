package storetest

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// RankingStore is a store whose full-text ranking and recall context the
// ranking suite checks: the Knowledge contract, plus the turns around a
// recalled message.
type RankingStore interface {
	KnowledgeStore
	// MessagesAround returns the live messages within radius turns of each
	// referenced message (it included, when live), each once, ordered by
	// conversation and Seq, scoped to the tenant and user, Raw left empty:
	// the store's own messages, shared, which the caller never writes
	// into. A reply the upstream broke off (memory.Message.Failed) is left
	// out, not even a neighbour; unknown refs add nothing; radius < 0 finds
	// nothing.
	MessagesAround(ctx context.Context, rev *memory.Revisions, tenant, user string, refs []memory.MessageRef, radius int) ([]*memory.Message, error)
}

// RunRanking runs the ranking suite: SearchText is Okapi BM25 over all of a
// user's items, the same on every store (checked against a reference
// implementation of the documented ranking, score for score), and
// MessagesAround. open must return a fresh, empty store for every call.
func RunRanking(t *testing.T, open func(t *testing.T) RankingStore) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, s RankingStore)
	}{
		{"SearchTextIsBM25", testSearchTextIsBM25},
		{"SearchTextWeighsRelatedTerms", testSearchTextWeighsRelatedTerms},
		{"SearchTextFindsOldEvidence", testSearchTextFindsOldEvidence},
		{"SearchTextStatisticsFollowDeletes", testSearchTextStatisticsFollowDeletes},
		{"ItemsKeepSaidAt", testItemsKeepSaidAt},
		{"MessagesAround", testMessagesAround},
		{"MessagesAroundLeavesOutFailedReplies", testMessagesAroundLeavesOutFailed},
		{"MessagesAroundFollowsChanges", testMessagesAroundFollowsChanges},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(t, open(t))
		})
	}
}

// chatter is small talk between the corpus's two speakers.
var chatter = []string{
	"Thanks %s! That is really nice of you.",
	"Bye %s! Talk soon.",
	"Wow %s, that sounds great!",
	"Haha yes %s, I really like that too.",
	"Cool! What did it look like, %s?",
	"I know, right %s? So true.",
	"Take care %s, see you later.",
	"That is awesome %s, I am so happy for you.",
}

// evidence are the turns the corpus's questions are about, at fixed
// positions (turn index -> text).
var evidence = map[int]string{
	3:   "I went to the LGBTQ support group yesterday and the stories were so powerful.",
	17:  "I painted a sunrise over the lake last weekend with my kids.",
	40:  "My grandmother gave me a necklace from Sweden when I was ten.",
	95:  "We are planning a camping trip to the mountains in June.",
	150: "I signed up for a pottery class on Tuesday evenings.",
	233: "The adoption agency called me about the interview next month.",
}

// corpusSize is how many turns the ranking corpus holds: enough for the
// speakers' names to pass memory.CommonTermMinDF.
const corpusSize = 260

// rankingCorpus returns a long two-speaker conversation: every turn names
// its speaker, most are small talk, a few hold the evidence.
func rankingCorpus(id memory.Identity) []memory.Item {
	speakers := [2]string{"Caroline", "Melanie"}
	items := make([]memory.Item, 0, corpusSize)
	for i := range corpusSize {
		me, you := speakers[i%2], speakers[(i+1)%2]
		text, ok := evidence[i]
		switch {
		case ok:
		case i%5 == 0:
			text = fmt.Sprintf("The kids loved the park today, %s, and we had ice cream number %d.", you, i)
		default:
			text = fmt.Sprintf(chatter[i%len(chatter)], you)
		}
		it := item(id, "message", fmt.Sprintf("t%03d", i), me+": "+text, nil)
		it.CreatedAt = baseTime.Add(time.Duration(i) * time.Minute)
		items = append(items, it)
	}
	return items
}

// refWords splits ASCII text as both stores do: lower case, runs of
// letters and digits.
func refWords(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	})
}

// refRank is the reference ranking SearchText documents, over items (one
// user's, all of them) for query and its related terms, keeping the items
// keep accepts: Okapi BM25 with k1 1.2, b 0.75, idf ln((N-df+0.5)/(df+0.5))
// floored at 1e-6, query terms without stopwords (memory.QueryTerms),
// common terms (in half the items or more and more than
// memory.CommonTermMinDF) left out unless all of the query's own are;
// related terms as memory.RelatedTerm says (idf times weight, once each
// with the highest weight, not when a query term, never when in
// 1/memory.RelatedCommonDivisor of the items and more than
// memory.CommonTermMinDF); ties by lower id.
func refRank(items []memory.Item, query string, related []memory.RelatedTerm, keep func(memory.Item) bool) []memory.Item {
	n := float64(len(items))
	tf := make([]map[string]int, len(items))
	df := map[string]int{}
	total := 0
	for i, it := range items {
		tf[i] = map[string]int{}
		for _, w := range refWords(it.Text) {
			tf[i][w]++
			total++
		}
		for w := range tf[i] {
			df[w]++
		}
	}
	avg := float64(total) / n
	common := func(w string) bool { return 2*df[w] >= len(items) && df[w] > memory.CommonTermMinDF }
	var terms, selective []string
	own := map[string]bool{}
	for _, w := range memory.QueryTerms(query, 64) {
		own[w] = true
		if df[w] == 0 {
			continue
		}
		terms = append(terms, w)
		if !common(w) {
			selective = append(selective, w)
		}
	}
	if len(selective) > 0 {
		terms = selective
	}
	weight := map[string]float64{}
	for _, w := range terms {
		weight[w] = 1
	}
	for _, r := range related {
		w := strings.ToLower(r.Term)
		broad := memory.RelatedCommonDivisor*df[w] >= len(items) && df[w] > memory.CommonTermMinDF
		if own[w] || df[w] == 0 || broad || r.Weight <= 0 {
			continue
		}
		if _, ok := weight[w]; !ok {
			terms = append(terms, w)
		}
		weight[w] = max(weight[w], min(r.Weight, 1))
	}
	var out []memory.Item
	for i, it := range items {
		score, hit := 0.0, false
		for _, w := range terms {
			c := float64(tf[i][w])
			if c == 0 {
				continue
			}
			hit = true
			idf := weight[w] * max(math.Log((n-float64(df[w])+0.5)/(float64(df[w])+0.5)), 1e-6)
			score += idf * c * (memory.BM25K1 + 1) /
				(c + memory.BM25K1*(1-memory.BM25B+memory.BM25B*float64(len(refWords(it.Text)))/avg))
		}
		if hit && keep(it) {
			it.Score = score
			out = append(out, it)
		}
	}
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].Score != out[b].Score {
			return out[a].Score > out[b].Score
		}
		return out[a].ID < out[b].ID
	})
	return out
}

// stored returns the user's items as the store holds them (with ids).
func storedItems(tb testing.TB, s Knowledge, tenant, user string, corpus []memory.Item) []memory.Item {
	tb.Helper()
	got := mustSearchText(tb, s, memory.ItemQuery{Tenant: tenant, User: user,
		Text: "caroline melanie", Limit: len(corpus) + 10})
	if len(got) != len(corpus) {
		tb.Fatalf("every corpus item names a speaker: found %d of %d", len(got), len(corpus))
	}
	return got
}

// assertSameRanking checks got against the reference want: the same items
// in the same order (items whose reference scores tie within 1e-9 may come
// in either order) with the same scores within 1e-6, relative.
func assertSameRanking(tb testing.TB, what string, got, want []memory.Item) {
	tb.Helper()
	if len(got) != len(want) {
		tb.Fatalf("%s: %d results %q, reference %d %q", what, len(got), refs(got), len(want), refs(want))
	}
	for i := range got {
		w := want[i]
		if got[i].Ref != w.Ref {
			j := slices.IndexFunc(want, func(it memory.Item) bool { return it.Ref == got[i].Ref })
			if j < 0 || math.Abs(want[j].Score-w.Score) > 1e-9*w.Score {
				tb.Fatalf("%s: rank %d is %s, reference %s (%q vs %q)", what, i+1, got[i].Ref, w.Ref, refs(got), refs(want))
			}
			w = want[j]
		}
		if math.Abs(got[i].Score-w.Score) > 1e-6*max(w.Score, 1e-6) {
			tb.Fatalf("%s: %s scores %v, reference %v", what, got[i].Ref, got[i].Score, w.Score)
		}
	}
}

// testSearchTextIsBM25 ranks a fixed long conversation for a set of
// questions and checks every store ranks it as the reference does, score
// for score; the speakers' names, in every turn, do not decide the order.
func testSearchTextIsBM25(t *testing.T, s RankingStore) {
	alice := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	corpus := rankingCorpus(alice)
	mustAddItems(t, s, corpus...)
	// Another user whose statistics must not leak into alice's: pottery is
	// everywhere in bob's items.
	bob := memory.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}
	var bobs []memory.Item
	for i := range 40 {
		bobs = append(bobs, item(bob, "message", fmt.Sprintf("b%d", i), fmt.Sprintf("pottery and clay, lesson %d", i), nil))
	}
	mustAddItems(t, s, bobs...)
	all := storedItems(t, s, "acme", "alice", corpus)
	any := func(memory.Item) bool { return true }
	tests := []struct {
		query string
		first string // "" when the reference decides alone
	}{
		{"When did Caroline go to the LGBTQ support group?", "t003"},
		{"What did Melanie paint at the lake?", "t017"},
		{"Where did the necklace from her grandmother come from, Caroline?", "t040"},
		{"Melanie, when is the camping trip?", "t095"},
		{"pottery class", "t150"},
		{"Caroline adoption interview", "t233"},
		{"Caroline", ""},
		{"what did the kids love at the park", ""},
		{"really nice", ""},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			want := refRank(all, tt.query, nil, any)
			got := mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "alice", Text: tt.query, Limit: 10})
			if len(want) > 10 {
				want = want[:10]
			}
			assertSameRanking(t, "SearchText", got, want)
			if tt.first != "" && (len(got) == 0 || got[0].Ref != tt.first) {
				t.Fatalf("SearchText(%q) = %q, want %s first", tt.query, refs(got), tt.first)
			}
		})
	}
	t.Run("scoped", func(t *testing.T) {
		excluded := map[string]bool{"t003": true, "t010": true}
		want := refRank(all, "LGBTQ support group kids park", nil, func(it memory.Item) bool { return !excluded[it.Ref] })[:5]
		got := mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "alice", Conversation: "c1",
			Text: "LGBTQ support group kids park", ExcludeRefs: []string{"t003", "t010"}, Limit: 5})
		assertSameRanking(t, "SearchText scoped", got, want)
	})
}

// testSearchTextWeighsRelatedTerms ranks the fixed conversation for
// queries with related terms (memory.ItemQuery.Related) and checks every
// store ranks it as the reference does, score for score: a passage that
// holds only a related word is found, below one holding the query's own
// rarer words; a related term listed twice counts once, with its highest
// weight; one that is a query word counts as the query word; a common one
// (a speaker's name) is left out, and so is one in a twentieth of the
// items (memory.RelatedCommonDivisor), though as the query's own word it
// still counts.
func testSearchTextWeighsRelatedTerms(t *testing.T, s RankingStore) {
	alice := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	corpus := rankingCorpus(alice)
	for i := range memory.CommonTermMinDF + 10 { // hiking: in 110 of 370 items
		it := item(alice, "message", fmt.Sprintf("h%03d", i), fmt.Sprintf("Melanie: we went hiking again, Caroline, trail %d", i), nil)
		it.CreatedAt = baseTime.Add(time.Duration(corpusSize+i) * time.Minute)
		corpus = append(corpus, it)
	}
	mustAddItems(t, s, corpus...)
	all := storedItems(t, s, "acme", "alice", corpus)
	rel := func(pairs ...any) []memory.RelatedTerm {
		var out []memory.RelatedTerm
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, memory.RelatedTerm{Term: pairs[i].(string), Weight: pairs[i+1].(float64)})
		}
		return out
	}
	any := func(memory.Item) bool { return true }
	tests := []struct {
		name    string
		query   string
		related []memory.RelatedTerm
		first   string // "" when the reference decides alone
	}{
		{"only a related word matches", "What ceramics course did Caroline join?",
			rel("pottery", 0.5, "class", 0.3, "potteries", 0.5), "t150"},
		{"own rarer words outrank related ones", "Melanie, when is the camping trip?",
			rel("painted", 0.4, "lake", 0.4), "t095"},
		{"listed twice, highest weight", "jewellery", rel("necklace", 0.2, "necklace", 0.6, "NECKLACE", 0.1), "t040"},
		{"a query word is not related", "kids sunrise", rel("kids", 0.1, "lake", 0.3), "t017"},
		{"common related terms left out", "necklace", rel("caroline", 1.0, "melanie", 0.9), "t040"},
		{"all own words common", "Caroline Melanie", rel("adoption", 0.5, "agency", 0.5), "t233"},
		{"weights above one count as one", "meeting", rel("interview", 3.0, "zero", 0.0, "negative", -1.0), "t233"},
		{"broad related terms left out", "necklace", rel("hiking", 0.9, "trail", 0.9), "t040"},
		{"broad own terms count", "hiking necklace", rel("trail", 0.9), "t040"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := refRank(all, tt.query, tt.related, any)
			got := mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "alice", Text: tt.query, Related: tt.related, Limit: 10})
			if len(want) > 10 {
				want = want[:10]
			}
			assertSameRanking(t, "SearchText", got, want)
			if tt.first != "" && (len(got) == 0 || got[0].Ref != tt.first) {
				t.Fatalf("SearchText(%q, %v) = %q, want %s first", tt.query, tt.related, refs(got), tt.first)
			}
		})
	}
}

// testSearchTextFindsOldEvidence buries one turn under hundreds of newer
// ones that share the question's common words: it still ranks first.
func testSearchTextFindsOldEvidence(t *testing.T, s RankingStore) {
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	items := []memory.Item{item(id, "message", "old", "Caroline: my favourite band is Radiohead, I saw them in Lisbon", nil)}
	for i := range 400 {
		items = append(items, item(id, "message", fmt.Sprintf("new%d", i),
			fmt.Sprintf("Caroline: my favourite thing today is the weather, number %d", i), nil))
	}
	mustAddItems(t, s, items...)
	got := mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "alice",
		Text: "Caroline, what is my favourite band?", Limit: 5})
	if len(got) == 0 || got[0].Ref != "old" {
		t.Fatalf("SearchText = %q, want the old turn first", refs(got))
	}
}

// testSearchTextStatisticsFollowDeletes checks the statistics follow
// deletes and text updates: once a term's items are gone or changed, it
// finds nothing, and the remaining items rank as the reference says.
func testSearchTextStatisticsFollowDeletes(t *testing.T, s RankingStore) {
	c1 := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	c2 := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c2"}
	mustSave(t, s, simple(t, c1, 1))
	mustAddItems(t, s,
		item(c1, "message", "a", "sailing in the bay with friends", nil),
		item(c1, "message", "b", "sailing lessons start in May", nil),
		item(c2, "message", "c", "the bay was calm", nil),
		item(c2, "message", "d", "friends came for dinner", nil),
	)
	if err := s.DeleteConversation(testCtx(t), c1); err != nil {
		t.Fatal(err)
	}
	if got := mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "alice", Text: "sailing", Limit: 5}); len(got) != 0 {
		t.Fatalf("SearchText(sailing) after the delete = %q", refs(got))
	}
	mustAddItems(t, s, item(c2, "message", "d", "friends came for lunch by the bay", nil))
	if got := mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "alice", Text: "dinner", Limit: 5}); len(got) != 0 {
		t.Fatalf("SearchText(dinner) after the update = %q", refs(got))
	}
	all := mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "alice", Text: "bay calm friends lunch", Limit: 5})
	want := refRank(all, "bay calm friends lunch", nil, func(memory.Item) bool { return true })
	assertSameRanking(t, "SearchText after delete and update", all, want)
}

// testItemsKeepSaidAt stores items with the time their source was said
// (imported history): searches return it, and an item without one reads
// its CreatedAt.
func testItemsKeepSaidAt(t *testing.T, s RankingStore) {
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	said := time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC)
	old := item(id, "message", "old", "we adopted a puppy named Biscuit", vec4(1, 0, 0, 0))
	old.SaidAt = said
	plain := item(id, "message", "plain", "the puppy sleeps all day", vec4(0.9, 0.1, 0, 0))
	mustAddItems(t, s, old, plain)
	check := func(what string, got []memory.Item) {
		t.Helper()
		for _, it := range got {
			want := baseTime
			if it.Ref == "old" {
				want = said
			}
			if !it.SaidAt.Equal(want) {
				t.Errorf("%s: %s SaidAt = %v, want %v", what, it.Ref, it.SaidAt, want)
			}
		}
		if len(got) != 2 {
			t.Errorf("%s = %q, want both", what, refs(got))
		}
	}
	check("SearchText", mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "alice", Text: "puppy", Limit: 5}))
	check("SearchVector", mustSearchVector(t, s, memory.ItemQuery{Tenant: "acme", User: "alice",
		Embedding: vec4(1, 0, 0, 0), Model: testModel, Dims: 4, Limit: 5}))
	// Indexing again without a said-at time keeps the stored one.
	again := old
	again.SaidAt, again.CreatedAt = time.Time{}, time.Time{}
	mustAddItems(t, s, again)
	check("SearchText after a re-index", mustSearchText(t, s, memory.ItemQuery{Tenant: "acme", User: "alice", Text: "puppy", Limit: 5}))
}

// testMessagesAround covers the recall context: the turns before and after
// a message, live ones only, within its own user's conversation.
func testMessagesAround(t *testing.T, s RankingStore) {
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	for n := 1; n <= 4; n++ { // seq 1..8: question n, answer n
		mustSave(t, s, simple(t, id, n))
	}
	other := memory.Identity{Tenant: "acme", User: "bob", Conversation: "c1"}
	mustSave(t, s, simple(t, other, 1))
	key := func(n, i int) memory.MessageRef {
		return memory.MessageRef{Conversation: "c1", Key: memory.Key(fmt.Sprintf("ex-alice-c1-%d", n), i)}
	}
	around := func(refs []memory.MessageRef, radius int) []string {
		t.Helper()
		got, err := messagesAround(testCtx(t), s, "acme", "alice", refs, radius)
		if err != nil {
			t.Fatalf("MessagesAround: %v", err)
		}
		var out []string
		for _, m := range got {
			if m.Conversation != "c1" || m.Key == "" || m.Seq == 0 || m.CreatedAt.IsZero() {
				t.Fatalf("MessagesAround returned an incomplete message %+v", m)
			}
			out = append(out, fmt.Sprintf("%d:%s", m.Seq, m.Content))
		}
		return out
	}
	tests := []struct {
		name   string
		refs   []memory.MessageRef
		radius int
		want   []string
	}{
		{"answer brings its question", []memory.MessageRef{key(2, 1)}, 1, []string{"3:question 2", "4:answer 2", "5:question 3"}},
		{"first message", []memory.MessageRef{key(1, 0)}, 1, []string{"1:question 1", "2:answer 1"}},
		{"overlapping refs once each", []memory.MessageRef{key(2, 0), key(2, 1), key(2, 0)}, 1,
			[]string{"2:answer 1", "3:question 2", "4:answer 2", "5:question 3"}},
		{"radius 0", []memory.MessageRef{key(3, 0)}, 0, []string{"5:question 3"}},
		{"unknown and foreign refs", []memory.MessageRef{{Conversation: "c1", Key: "nope"},
			{Conversation: "c2", Key: memory.Key("ex-alice-c1-1", 0)}}, 1, nil},
		{"none", nil, 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := around(tt.refs, tt.radius); !slices.Equal(got, tt.want) {
				t.Fatalf("MessagesAround = %q, want %q", got, tt.want)
			}
		})
	}
	got, err := messagesAround(testCtx(t), s, "acme", "bob", []memory.MessageRef{key(2, 1)}, 1)
	if err != nil || len(got) != 0 {
		t.Fatalf("another user's MessagesAround = %v, %v; want nothing", got, err)
	}
	// Regenerating the fourth exchange supersedes seq 7 and 8: they are no
	// longer context.
	prior := []memory.Message{
		msg(t, "user", "question 1"), msg(t, "assistant", "answer 1"),
		msg(t, "user", "question 2"), msg(t, "assistant", "answer 2"),
		msg(t, "user", "question 3"), msg(t, "assistant", "answer 3"),
	}
	mustSave(t, s, exchange(id, "regen", 5, prior, []memory.Message{msg(t, "user", "question 4")},
		msg(t, "assistant", "answer 4 again")))
	if got := around([]memory.MessageRef{key(4, 0)}, 1); !slices.Equal(got, []string{"6:answer 3"}) {
		t.Fatalf("MessagesAround after a regeneration = %q", got)
	}
}

// testMessagesAroundLeavesOutFailed: a reply the upstream broke off
// (memory.FailedField) is never recall context, not even as the neighbour
// of a recalled turn; the turns around it still are.
func testMessagesAroundLeavesOutFailed(t *testing.T, s RankingStore) {
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	mustSave(t, s, simple(t, id, 1))
	broken, err := memory.MarkFailed(msg(t, "assistant", "The vault code is 4417 and"), "overloaded")
	if err != nil {
		t.Fatal(err)
	}
	mustSave(t, s, exchange(id, "ex-broken", 2, nil, []memory.Message{msg(t, "user", "question 2")}, broken))
	mustSave(t, s, simple(t, id, 3))
	refs := []memory.MessageRef{{Conversation: "c1", Key: memory.Key("ex-broken", 0)}, {Conversation: "c1", Key: memory.Key("ex-alice-c1-3", 0)}}
	got, err := messagesAround(testCtx(t), s, "acme", "alice", refs, 1)
	if err != nil {
		t.Fatalf("MessagesAround: %v", err)
	}
	var out []string
	for _, m := range got {
		out = append(out, fmt.Sprintf("%d:%s", m.Seq, m.Content))
	}
	if want := []string{"2:answer 1", "3:question 2", "5:question 3", "6:answer 3"}; !slices.Equal(out, want) {
		t.Fatalf("MessagesAround = %q, want %q (the broken-off reply at seq 4 left out)", out, want)
	}
}

// testMessagesAroundFollowsChanges asks for the same turns again and again
// (a store may keep them) while the conversation changes under them: a new
// turn joins the window of the last one, a regeneration takes superseded
// turns out, and a deleted conversation or an erased user leaves nothing,
// each seen by the very next call. Another user never gets them.
func testMessagesAroundFollowsChanges(t *testing.T, s RankingStore) {
	c1 := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c1"}
	c2 := memory.Identity{Tenant: "acme", User: "alice", Conversation: "c2"}
	for n := 1; n <= 3; n++ { // c1 seq 1..6: question n, answer n
		mustSave(t, s, simple(t, c1, n))
	}
	mustSave(t, s, simple(t, c2, 1))
	ref := func(id memory.Identity, n, i int) memory.MessageRef {
		return memory.MessageRef{Conversation: id.Conversation, Key: memory.Key(fmt.Sprintf("ex-alice-%s-%d", id.Conversation, n), i)}
	}
	around := func(user string, refs ...memory.MessageRef) []string {
		t.Helper()
		var out []string
		for range 2 { // the second call may be answered from memory
			got, err := messagesAround(testCtx(t), s, "acme", user, refs, 1)
			if err != nil {
				t.Fatalf("MessagesAround: %v", err)
			}
			out = out[:0]
			for _, m := range got {
				out = append(out, fmt.Sprintf("%s/%d:%s", m.Conversation, m.Seq, m.Content))
			}
		}
		return out
	}
	check := func(what string, got, want []string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Fatalf("MessagesAround %s = %q, want %q", what, got, want)
		}
	}
	last, middle, first, other := ref(c1, 3, 1), ref(c1, 2, 0), ref(c1, 1, 1), ref(c2, 1, 0)
	check("of the last turn", around("alice", last), []string{"c1/5:question 3", "c1/6:answer 3"})
	check("of a middle turn", around("alice", middle), []string{"c1/2:answer 1", "c1/3:question 2", "c1/4:answer 2"})
	check("of the first answer", around("alice", first), []string{"c1/1:question 1", "c1/2:answer 1", "c1/3:question 2"})
	check("of another conversation", around("alice", other), []string{"c2/1:question 1", "c2/2:answer 1"})
	check("for another user", around("bob", last, middle, other), nil)

	mustSave(t, s, simple(t, c1, 4))
	check("of the last turn after a new one", around("alice", last),
		[]string{"c1/5:question 3", "c1/6:answer 3", "c1/7:question 4"})
	check("of a middle turn after a new one", around("alice", middle), []string{"c1/2:answer 1", "c1/3:question 2", "c1/4:answer 2"})

	// Regenerating the second answer supersedes seq 3 onwards.
	mustSave(t, s, exchange(c1, "regen", 5, []memory.Message{msg(t, "user", "question 1"), msg(t, "assistant", "answer 1")},
		[]memory.Message{msg(t, "user", "question 2")}, msg(t, "assistant", "answer 2 again")))
	check("of the first answer after a regeneration", around("alice", first), []string{"c1/1:question 1", "c1/2:answer 1"})
	check("of a superseded turn", around("alice", middle), []string{"c1/2:answer 1"})
	check("of the last turn after a regeneration", around("alice", last), nil)

	if err := s.DeleteConversation(testCtx(t), c2); err != nil {
		t.Fatalf("DeleteConversation: %v", err)
	}
	check("of a deleted conversation", around("alice", other), nil)
	check("of the first answer before the erasure", around("alice", first), []string{"c1/1:question 1", "c1/2:answer 1"})
	if err := s.DeleteUser(testCtx(t), "acme", "alice"); err != nil {
		t.Fatalf("DeleteUser: %v", err)
	}
	check("of an erased user", around("alice", first, middle, last, other), nil)
}
