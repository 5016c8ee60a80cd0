package prompt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine/cache"
	"github.com/memgate/memgate/internal/engine/prompt"
	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/tokens"
)

// This file measures recall coverage the way issue 14 states its goal: a
// long two-speaker conversation (600 turns in 20 dated sessions, speakers
// who name each other, mostly small talk), questions about turns said up
// to ~580 turns earlier, some whose answer is the turn after a question,
// some needing two turns, some asking when; at a 4,000-token budget, the
// share of evidence turns that reach the prompt.

// fact is one thing said in the conversation and a question about it.
type fact struct {
	// ask, when set, is the other speaker's question just before the
	// evidence turn (the evidence is its answer).
	ask      string
	say      string // the evidence turn
	question string
	kind     string // single, answer, multi, temporal
	// also is a second evidence turn (multi-hop), said in a later session.
	also string
}

var facts = []fact{
	{say: "I went to the LGBTQ support group yesterday and the stories were so powerful.", question: "When did Caroline go to the LGBTQ support group?", kind: "temporal"},
	{ask: "Caroline, what are you studying these days?", say: "Counseling psychology at the community college, I want to help trans teens.", question: "What is Caroline studying at college?", kind: "answer"},
	{say: "We painted a sunrise over the lake with the kids last weekend.", question: "What did Melanie paint with her kids?", kind: "single"},
	{ask: "Melanie, where did you go camping this summer?", say: "Up at Moraine Lake in Banff, we slept under the stars for three nights.", question: "Where did Melanie go camping?", kind: "answer"},
	{say: "My grandmother gave me a silver necklace from Sweden when I was ten.", question: "Where is Caroline's necklace from?", kind: "single"},
	{say: "I signed up for a pottery class on Tuesday evenings, my first bowl was lopsided.", question: "When did Melanie start the pottery class?", kind: "temporal"},
	{say: "The adoption agency called me about an interview for the home study.", question: "What did the adoption agency call Caroline about?", kind: "single"},
	{ask: "What instrument do you play, Melanie?", say: "The clarinet, I played it in the school band for six years.", question: "What instrument does Melanie play?", kind: "answer"},
	{say: "I ran a charity race for mental health awareness, five kilometres in the rain.", question: "What cause was Caroline's charity race for?", kind: "single"},
	{say: "Our dog Luna learned to open the fridge door, it is chaos.", question: "What is the name of Melanie's dog?", kind: "single"},
	{say: "I read Becoming Nicole on the train and cried at the ending.", question: "Which book did Caroline read on the train?", kind: "single"},
	{ask: "How did the concert go, Melanie?", say: "Matt Patterson played an amazing acoustic set, the kids danced all night.", question: "Whose concert did Melanie see?", kind: "answer"},
	{say: "I started volunteering at the youth shelter on Saturdays.", question: "When did Caroline start volunteering at the youth shelter?", kind: "temporal"},
	{say: "My brother is getting married in Portugal next spring.", also: "The wedding in Portugal is moved to Sintra, near the palace.", question: "Where in Portugal is the wedding of Melanie's brother?", kind: "multi"},
	{say: "I applied for an internship at the counseling center downtown.", also: "The counseling center accepted me, I start the internship in August!", question: "Did Caroline get the internship at the counseling center?", kind: "multi"},
	{ask: "What is your favourite hike, Caroline?", say: "The Skyline Trail at Mount Rainier, the wildflowers in July are unreal.", question: "What is Caroline's favourite hike?", kind: "answer"},
	{say: "We bought a used sailboat and named it Blue Heron.", question: "What did Melanie name the sailboat?", kind: "single"},
	{say: "I made a rainbow flag mural for the community center with local artists.", question: "What mural did Caroline make?", kind: "single"},
	{say: "The kids built a birdhouse for the cardinals in our backyard.", question: "What did Melanie's kids build?", kind: "single"},
	{say: "I finally got my driver's license after failing the parallel parking twice.", question: "When did Caroline get her driver's license?", kind: "temporal"},
	{ask: "Caroline, what did you cook for the potluck?", say: "A spicy lentil curry from my mom's recipe, everyone asked for seconds.", question: "What did Caroline bring to the potluck?", kind: "answer"},
	{say: "I took the kids to the science museum and they loved the dinosaur fossils.", question: "What did Melanie's kids love at the museum?", kind: "single"},
	{say: "My transition anniversary is coming up, three years of being myself.", question: "How long has it been since Caroline's transition?", kind: "single"},
	{say: "We adopted two guinea pigs called Oscar and Pepper.", also: "Pepper the guinea pig got sick, the vet said it was just a cold.", question: "Which of Melanie's guinea pigs got sick?", kind: "multi"},
	{say: "I joined an activist group that lobbies for inclusive school policies.", question: "What does Caroline's activist group lobby for?", kind: "single"},
	{say: "I went to a pride parade in Seattle with my friends from the support group.", question: "When did Caroline go to the pride parade?", kind: "temporal"},
	{ask: "Melanie, how do you relax after work?", say: "Swimming laps at the community pool, it clears my head.", question: "How does Melanie relax after work?", kind: "answer"},
	{say: "My friend Jolene gave me a sunflower painting for my birthday.", question: "Who gave Caroline a painting for her birthday?", kind: "single"},
	// Paraphrases: the question shares one word with its evidence, at most.
	{say: "Melanie, I finally quit smoking, forty days without a cigarette now.", question: "What unhealthy habit did Caroline give up?", kind: "paraphrase"},
	{say: "Caroline, we are renovating the attic into a studio for my ceramics.", question: "What is Melanie turning the top floor of her house into?", kind: "paraphrase"},
	{say: "Melanie, my landlord raised the rent so I am moving to Tacoma in the fall.", question: "Why is Caroline relocating, and to which city?", kind: "paraphrase"},
	{say: "Caroline, my husband surprised me with tickets to Iceland for our anniversary.", question: "Which country is Melanie travelling to with her spouse?", kind: "paraphrase"},
	{say: "Melanie, the doctor said my ankle is sprained, no running for six weeks.", question: "What injury does Caroline have?", kind: "paraphrase"},
	{say: "Caroline, my daughter won first prize at the spelling bee!", question: "What competition did Melanie's child win?", kind: "paraphrase"},
}

// smallTalk is what most turns are; %s is the other speaker's name.
var smallTalk = []string{
	"Thanks, %s! That is really nice of you to say.",
	"Haha, I know right, %s? So true.",
	"Wow %s, that sounds great! I am so happy for you.",
	"Bye %s! Talk soon, take care.",
	"Cool! What did it look like, %s?",
	"That is awesome, %s. You always make my day.",
	"Aww, %s, I really appreciate it.",
	"Yeah, %s, life has been busy but good lately.",
	"Oh nice, %s! Tell me more about it.",
	"I totally get that, %s. It means a lot.",
	"Hey %s! Long time no talk, how have you been?",
	"Same here, %s, just taking it one day at a time.",
}

// fillers are everyday turns that share the common words of the facts.
var fillers = []string{
	"The weather was lovely today, %s, we spent the afternoon at the park with the kids.",
	"Work has been hectic this week, %s, so many meetings and deadlines.",
	"I made pancakes this morning, %s, the kids wanted seconds.",
	"We watched a movie last night, %s, it was funny but a bit long.",
	"I have been trying to sleep more, %s, it really helps my mood.",
	"The traffic downtown was terrible, %s, it took an hour to get home.",
	"My neighbour lent us a ladder, %s, so we could fix the gutter.",
	"I went grocery shopping, %s, and forgot the milk again.",
	"The kids have a school play next week, %s, they are so excited.",
	"I tried a new coffee place, %s, the latte was really good.",
}

// turn is one generated conversation turn.
type turn struct {
	role, text string
	at         time.Time
	fact       int  // index in facts + 1, 0 for none
	also       bool // the fact's second evidence turn
}

// longConversation generates the conversation: 20 sessions of 30 turns,
// Caroline as the user and Melanie as the assistant, each fact's turns at
// a random place in the first 560 turns (a multi-hop fact's second turn
// 100-200 turns later).
func longConversation(r *rand.Rand) []turn {
	const n = 600
	turns := make([]turn, n)
	start := time.Date(2023, 5, 1, 13, 0, 0, 0, time.UTC)
	name := func(i int) (me, you string) {
		if i%2 == 0 {
			return "Caroline", "Melanie"
		}
		return "Melanie", "Caroline"
	}
	for i := range turns {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		_, you := name(i)
		text := fmt.Sprintf(smallTalk[r.IntN(len(smallTalk))], you)
		if r.IntN(3) == 0 {
			text = fmt.Sprintf(fillers[r.IntN(len(fillers))], you)
		}
		session := i / 30
		turns[i] = turn{role: role, text: text,
			at: start.Add(time.Duration(session)*72*time.Hour + time.Duration(i%30)*time.Minute)}
	}
	used := map[int]bool{}
	place := func(lo, hi int, speaker string) int {
		for {
			i := lo + r.IntN(hi-lo)
			// Caroline speaks on even turns, Melanie on odd ones.
			if (speaker == "Caroline") != (i%2 == 0) {
				i++
			}
			if i < hi && !used[i] && !used[i-1] && !used[i+1] {
				used[i] = true
				return i
			}
		}
	}
	for k, f := range facts {
		speaker := "Caroline"
		if strings.Contains(f.question, "Melanie") {
			speaker = "Melanie"
		}
		hi := 560
		if f.also != "" {
			hi = 350
		}
		i := place(2, hi, speaker)
		turns[i].text, turns[i].fact = f.say, k+1
		if f.ask != "" {
			turns[i-1].text = f.ask
			used[i-1] = true
		}
		if f.also != "" {
			j := place(i+100, min(i+200, 590), speaker)
			turns[j].text, turns[j].fact, turns[j].also = f.also, k+1, true
		}
	}
	return turns
}

// coverage is what one run measured.
type coverage struct {
	evidence, found         int
	deep, deepFound         int // evidence more than 300 turns back
	temporal, dated         int // temporal evidence found with its session's date
	byKind, byKindFound     map[string]int
	lastN                   int // evidence in the last 4,000 tokens of the conversation
	tokensSent, tokensLimit int
}

// measureCoverage stores the conversation in a fresh SQLite store, indexed
// as live capture does, and asks every fact's question at budget tokens.
func measureCoverage(t *testing.T, budget int) coverage {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "memgate.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	counter, err := tokens.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	emb := recall.NewLocal(384)
	ix := recall.NewIndexer(st, emb, nil)
	id := memory.Identity{Tenant: "default", User: "caroline", Conversation: "chat"}
	turns := longConversation(rand.New(rand.NewPCG(14, 600)))
	for i := 0; i+1 < len(turns); i += 2 {
		u, a := turns[i], turns[i+1]
		ex := memory.Exchange{ID: fmt.Sprintf("ex%03d", i/2), Identity: id, Model: "gpt-4o-mini", At: u.at,
			Turn:  []memory.Message{{Role: "user", Content: u.text, Raw: mustRaw(t, "user", u.text)}},
			Reply: memory.Message{Role: "assistant", Content: a.text, Raw: mustRaw(t, "assistant", a.text)}}
		res, err := st.SaveExchange(ctx, ex)
		if err != nil {
			t.Fatal(err)
		}
		if err := ix.AfterSave(ctx, ex, res); err != nil {
			t.Fatal(err)
		}
	}
	searcher := recall.NewSearcher(st, emb, recall.SearchOptions{TopK: 5, MinSimilarity: 0.2,
		RecencyHalfLife: 90 * 24 * time.Hour, Stats: st})
	rec := recall.NewRecaller(st, searcher, emb, recall.RecallOptions{CrossConversation: true,
		FactsMax: 20, FactRelevance: 0.2, Around: st})
	now := turns[len(turns)-1].at.Add(time.Hour)
	reads := cache.NewReads(st, nil, cache.DefaultTailBytes, cache.DefaultKnowledgeBytes)
	asm, err := prompt.NewAssembler(prompt.Deps{History: reads, Summaries: reads, Facts: reads, Recaller: rec, Counter: counter, Revisions: st},
		prompt.Options{RecentMessages: 20, MaxContextTokens: 8000, CompletionReserve: 1024,
			Shares: prompt.Shares{Summary: 0.3, Pinned: 0.1, Facts: 0.15, Recall: 0.2}, FactsMax: 20,
			Now: func() time.Time { return now }}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The last-N baseline: the newest turns that fit in the budget.
	inLast := map[int]bool{}
	for i, spent := len(turns)-1, 0; i >= 0; i-- {
		spent += counter.RawMessage("gpt-4o-mini", mustRaw(t, turns[i].role, turns[i].text))
		if spent > budget {
			break
		}
		inLast[i] = true
	}
	c := coverage{byKind: map[string]int{}, byKindFound: map[string]int{}, tokensLimit: budget}
	for k, f := range facts {
		req := memory.Request{Identity: id, Mode: memory.ModeOn, Model: "gpt-4o-mini", Budget: budget,
			CrossConversation: true, Messages: []memory.Message{mustUserMsg(t, f.question)}}
		p, err := asm.Prepare(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		c.tokensSent += p.TokensSent
		prompt := promptText(t, p.Messages)
		for i, tn := range turns {
			if tn.fact != k+1 {
				continue
			}
			back := len(turns) - i
			c.evidence++
			c.byKind[f.kind]++
			if back > 300 {
				c.deep++
			}
			if inLast[i] {
				c.lastN++
			}
			if !strings.Contains(prompt, tn.text) {
				t.Logf("missed (%s, %d turns back): %q for %q", f.kind, back, tn.text, f.question)
				continue
			}
			c.found++
			c.byKindFound[f.kind]++
			if back > 300 {
				c.deepFound++
			}
			if f.kind == "temporal" {
				c.temporal++
				if datedNear(prompt, tn.text, tn.at.Format("2006-01-02")) {
					c.dated++
				}
			}
		}
	}
	return c
}

// datedNear reports whether the heading of the recalled passages' group
// holding text (the last line before it that opens with "[") carries date.
func datedNear(prompt, text, date string) bool {
	i := strings.Index(prompt, text)
	start := strings.LastIndex(prompt[:i], "\n[")
	if start < 0 {
		return false
	}
	heading, _, _ := strings.Cut(prompt[start+1:], "\n")
	return strings.Contains(heading, date)
}

// promptText joins the contents of every message but the last (the question).
func promptText(t *testing.T, msgs []json.RawMessage) string {
	t.Helper()
	var b strings.Builder
	for _, raw := range msgs[:len(msgs)-1] {
		var m struct{ Content string }
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		b.WriteString(m.Content)
		b.WriteByte('\n')
	}
	return b.String()
}

// mustUserMsg is a request's user message saying content.
func mustUserMsg(t *testing.T, content string) memory.Message {
	t.Helper()
	m, err := memory.ParseMessage(mustRaw(t, "user", content))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustRaw(t *testing.T, role, content string) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(map[string]string{"role": role, "content": content})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRecallCoverageLongConversation holds recall to issue 14's goal on the
// generated conversation: at 4,000 tokens, at least 70% of evidence turns in
// the prompt, 60% of those more than 300 turns back, and every found
// temporal evidence turn dated by its session.
func TestRecallCoverageLongConversation(t *testing.T) {
	if testing.Short() {
		t.Skip("stores and indexes a 600-turn conversation")
	}
	c := measureCoverage(t, 4000)
	pct := func(a, b int) float64 { return 100 * float64(a) / float64(max(b, 1)) }
	t.Logf("coverage at %d tokens: %d/%d evidence turns (%.0f%%); >300 turns back %d/%d (%.0f%%); last-N baseline %.0f%%; mean prompt %d tokens",
		c.tokensLimit, c.found, c.evidence, pct(c.found, c.evidence), c.deepFound, c.deep, pct(c.deepFound, c.deep),
		pct(c.lastN, c.evidence), c.tokensSent/len(facts))
	for kind, n := range c.byKind {
		t.Logf("  %-8s %d/%d (%.0f%%)", kind, c.byKindFound[kind], n, pct(c.byKindFound[kind], n))
	}
	t.Logf("  temporal evidence found with its date: %d/%d", c.dated, c.temporal)
	if pct(c.found, c.evidence) < 70 {
		t.Errorf("coverage %.0f%%, want at least 70%%", pct(c.found, c.evidence))
	}
	if pct(c.deepFound, c.deep) < 60 {
		t.Errorf("coverage of evidence more than 300 turns back %.0f%%, want at least 60%%", pct(c.deepFound, c.deep))
	}
	if c.dated != c.temporal {
		t.Errorf("%d of %d temporal evidence turns found without their date", c.temporal-c.dated, c.temporal)
	}
}
