// Package synth generates long conversations for the memory-quality
// evaluation, shaped like the public long-conversation benchmarks memgate is
// judged on: two friends who call each other by name talk over many dated
// sessions (600+ turns), mostly chit-chat and everyday topics, and now and
// then say something a question later asks about — single facts, answers
// given in the turn after the other's question, facts that need two turns
// from different sessions, events dated only by the session ("yesterday"),
// and facts asked about in other words.
//
// The first speaker is the application's user, the second the assistant
// (the evaluation scripts the upstream to say the second speaker's lines).
// Questions are in the third person and name the speaker, as the
// benchmarks' are. Every question lists its evidence turns, and each
// evidence turn the clause (Key) that carries the answer; no other turn
// contains that clause.
//
// Generation is a pure function of the seed and the options.
package synth

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
	"unicode"
)

// QType is a question type.
type QType string

// The question types, in report order.
const (
	// SingleHop asks, in the statement's words, about one turn.
	SingleHop QType = "single-hop"
	// Adjacent asks about the answer to the other speaker's question: the
	// question turn holds the words, the turn after it the answer.
	Adjacent QType = "adjacent"
	// MultiHop needs two turns from different sessions.
	MultiHop QType = "multi-hop"
	// Temporal asks when something happened, said relative to the
	// session's date ("yesterday"): the date must reach the prompt too.
	Temporal QType = "temporal"
	// Paraphrase asks without any content word of the statement.
	Paraphrase QType = "paraphrase"
)

// Types lists every question type in report order.
var Types = []QType{SingleHop, Adjacent, MultiHop, Temporal, Paraphrase}

// Options shape a generated conversation.
type Options struct {
	// Sessions is the number of sessions (conversations) per user.
	Sessions int
	// TurnsPerSession is the number of turns in each session, both
	// speakers counted (even: every user turn gets its reply).
	TurnsPerSession int
	// PerType is the number of questions of each type.
	PerType int
	// Start is the date of the first session.
	Start time.Time
}

// DefaultOptions are the options of the reported run: 24 sessions of 36
// turns, 864 turns in all, 10 questions of each type.
func DefaultOptions() Options {
	return Options{Sessions: 24, TurnsPerSession: 36, PerType: 10, Start: time.Date(2023, time.March, 4, 10, 0, 0, 0, time.UTC)}
}

// Turn is one message of a session.
type Turn struct {
	// Speaker is 0 (the user) or 1 (the assistant).
	Speaker int
	Text    string
	// At is when it was said.
	At time.Time
}

// Session is one conversation of the user, on one day.
type Session struct {
	// Conversation is the conversation id the session is replayed under.
	Conversation string
	// Date is when the session started.
	Date time.Time
	// Turns alternate speakers, the user first.
	Turns []Turn
}

// Ref points at one turn: session index and turn index within it.
type Ref struct {
	Session int `json:"session"`
	Turn    int `json:"turn"`
}

// Evidence is one turn a question needs.
type Evidence struct {
	Ref Ref `json:"ref"`
	// Key is the clause of the turn that carries the answer; finding it
	// (see Contains) in a prompt means the evidence reached the model.
	Key string `json:"key"`
}

// Question is one question about the conversation, asked after its end.
type Question struct {
	ID       string     `json:"id"`
	Type     QType      `json:"type"`
	Text     string     `json:"question"`
	Answer   string     `json:"answer"`
	Evidence []Evidence `json:"evidence"`
}

// Conversation is everything generated for one user.
type Conversation struct {
	Seed      uint64
	User      string
	Names     [2]string
	Sessions  []Session
	Questions []Question
}

// Turn returns the turn at r.
func (c Conversation) Turn(r Ref) Turn { return c.Sessions[r.Session].Turns[r.Turn] }

// Len returns the number of turns.
func (c Conversation) Len() int {
	n := 0
	for _, s := range c.Sessions {
		n += len(s.Turns)
	}
	return n
}

// Depth returns how many turns back from the end r is: 1 for the last turn.
func (c Conversation) Depth(r Ref) int {
	i := r.Turn
	for _, s := range c.Sessions[:r.Session] {
		i += len(s.Turns)
	}
	return c.Len() - i
}

// speakerNames are the pairs of friends, one pair per conversation.
var speakerNames = [][2]string{{"Maya", "Leo"}, {"Carla", "Tomás"}, {"Nina", "Jonah"}, {"Sara", "Marco"}, {"Elena", "Sam"}, {"Joana", "Felix"}}

// gen draws from the pools without repeating a value in a conversation.
type gen struct {
	rng  *rand.Rand
	used map[string]bool
}

func (g *gen) pick(pool []string) string {
	for _, i := range g.rng.Perm(len(pool)) {
		if !g.used[pool[i]] {
			g.used[pool[i]] = true
			return pool[i]
		}
	}
	return pool[g.rng.IntN(len(pool))]
}

func (g *gen) one(pool []string) string { return pool[g.rng.IntN(len(pool))] }

// fill replaces the placeholders.
func fill(s string, kv ...string) string { return strings.NewReplacer(kv...).Replace(s) }

// Generate returns the conversation of user for seed.
func Generate(seed uint64, user string, o Options) (Conversation, error) {
	if o.Sessions < 4 || o.TurnsPerSession < 8 || o.TurnsPerSession%2 != 0 || o.PerType < 1 {
		return Conversation{}, fmt.Errorf("synth: need at least 4 sessions of an even number (>= 8) of turns and one question per type")
	}
	need := o.PerType * 10 // adjacent and multi-hop take two turns, near misses two more
	if need > o.Sessions*o.TurnsPerSession/3 {
		return Conversation{}, fmt.Errorf("synth: %d sessions of %d turns cannot hold %d questions of each type", o.Sessions, o.TurnsPerSession, o.PerType)
	}
	for _, n := range []int{len(singleHop), len(paraphrased), len(adjacent), len(temporal)} {
		if o.PerType > n {
			return Conversation{}, fmt.Errorf("synth: at most %d questions per type", n)
		}
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	g := &gen{rng: rng, used: map[string]bool{}}
	c := Conversation{Seed: seed, User: user, Names: speakerNames[rng.IntN(len(speakerNames))]}

	// Sessions: distinct days, turns a minute or two apart.
	date := o.Start
	sessTopics := make([][]string, o.Sessions)
	for s := range o.Sessions {
		sess := Session{Conversation: fmt.Sprintf("%s-s%02d", user, s+1), Date: date}
		at := date
		for t := range o.TurnsPerSession {
			sess.Turns = append(sess.Turns, Turn{Speaker: t % 2, At: at})
			at = at.Add(time.Duration(40+rng.IntN(140)) * time.Second)
		}
		c.Sessions = append(c.Sessions, sess)
		for _, i := range rng.Perm(len(topics))[:3] {
			sessTopics[s] = append(sessTopics[s], topics[i])
		}
		date = date.AddDate(0, 0, 3+rng.IntN(8)).Add(time.Duration(rng.IntN(9)-4) * time.Hour)
	}

	taken := map[Ref]bool{}
	// place returns a free turn of speaker (and, when next, a free turn
	// after it by the other speaker) in a session accepted by ok.
	place := func(speaker int, next bool, ok func(int) bool) (Ref, error) {
		for range 10000 {
			r := Ref{rng.IntN(o.Sessions), rng.IntN(o.TurnsPerSession)}
			if r.Turn%2 != speaker || taken[r] || !ok(r.Session) {
				continue
			}
			if next && (r.Turn+1 >= o.TurnsPerSession || taken[Ref{r.Session, r.Turn + 1}]) {
				continue
			}
			taken[r] = true
			if next {
				taken[Ref{r.Session, r.Turn + 1}] = true
			}
			return r, nil
		}
		return Ref{}, fmt.Errorf("synth: no free turn left")
	}
	anywhere := func(int) bool { return true }
	names := func(subject int) (string, string) { return c.Names[subject], c.Names[1-subject] }
	// say puts clause in the turn at r, now and then (when more) followed
	// by a line about its topic, as people go on talking. Adjacent answers
	// and paraphrased facts stay alone: their tests check the wording.
	say := func(r Ref, topic, clause string, more bool) {
		text := sentence(clause)
		if !slices.Contains(sessTopics[r.Session], topic) {
			sessTopics[r.Session] = append(sessTopics[r.Session], topic)
		}
		if more && rng.IntN(2) == 0 {
			text += " " + sentence(g.one(topicFiller[topic]))
		}
		c.Sessions[r.Session].Turns[r.Turn].Text = g.address(c.Names[1-r.Turn%2], text)
	}
	// distract says the near-miss lines of a fact elsewhere, by either
	// speaker: the question's words then match several turns.
	distract := func(topic string, near []string) error {
		for _, l := range near {
			r, err := place(rng.IntN(2), false, anywhere)
			if err != nil {
				return err
			}
			say(r, topic, l, true)
		}
		return nil
	}
	q := 0
	add := func(t QType, text, answer string, ev ...Evidence) {
		q++
		c.Questions = append(c.Questions, Question{ID: fmt.Sprintf("%s-q%02d", user, q), Type: t, Text: text, Answer: answer, Evidence: ev})
	}

	for _, i := range rng.Perm(len(singleHop))[:o.PerType] {
		t := singleHop[i]
		subj := rng.IntN(2)
		r, err := place(subj, false, anywhere)
		if err != nil {
			return Conversation{}, err
		}
		s, _ := names(subj)
		v := g.pick(t.values)
		key := fill(t.say, "{V}", v)
		say(r, t.topic, key, true)
		if err := distract(t.topic, t.near); err != nil {
			return Conversation{}, err
		}
		add(SingleHop, fill(t.ask, "{S}", s), v, Evidence{r, key})
	}
	for _, i := range rng.Perm(len(adjacent))[:o.PerType] {
		t := adjacent[i]
		subj := rng.IntN(2)
		r, err := place(1-subj, true, anywhere) // the other asks, the subject answers
		if err != nil {
			return Conversation{}, err
		}
		s, _ := names(subj)
		v := g.pick(t.values)
		c.Sessions[r.Session].Turns[r.Turn].Text = fill(t.prompt, "{S}", s)
		ans := Ref{r.Session, r.Turn + 1}
		key := fill(t.reply, "{V}", v)
		say(ans, t.topic, key, false)
		add(Adjacent, fill(t.ask, "{S}", s), v, Evidence{ans, key})
	}
	for range o.PerType {
		subj := rng.IntN(2)
		first, err := place(subj, false, func(s int) bool { return s < o.Sessions-2 })
		if err != nil {
			return Conversation{}, err
		}
		second, err := place(subj, false, func(s int) bool { return s >= first.Session+2 })
		if err != nil {
			return Conversation{}, err
		}
		s, _ := names(subj)
		rel, n, city := g.pick(relations), g.pick(hopNames), g.pick(hopCities)
		h := hooks[rng.IntN(len(hooks))]
		d := details[rng.IntN(len(details))]
		v := g.pick(d.values)
		k1 := fill(h.say, "{R}", rel, "{N}", n, "{C}", city)
		k2 := fill(d.say, "{N}", n, "{V}", v)
		say(first, "family", k1, true)
		say(second, "family", k2, true)
		add(MultiHop, fill(d.ask, "{Q}", fill(h.ask, "{R}", rel, "{S}", s, "{C}", city)), v, Evidence{first, k1}, Evidence{second, k2})
	}
	for _, i := range rng.Perm(len(temporal))[:o.PerType] {
		t := temporal[i]
		subj := rng.IntN(2)
		r, err := place(subj, false, anywhere)
		if err != nil {
			return Conversation{}, err
		}
		s, _ := names(subj)
		rel := relatives[rng.IntN(len(relatives))]
		key := fill(t.say, "{W}", rel.text)
		say(r, t.topic, key, true)
		if err := distract(t.topic, t.near); err != nil {
			return Conversation{}, err
		}
		when := c.Sessions[r.Session].Date.AddDate(0, 0, rel.days)
		add(Temporal, fill(t.ask, "{S}", s), when.Format("2 January 2006"), Evidence{r, key})
	}
	for _, i := range rng.Perm(len(paraphrased))[:o.PerType] {
		t := paraphrased[i]
		subj := rng.IntN(2)
		r, err := place(subj, false, anywhere)
		if err != nil {
			return Conversation{}, err
		}
		s, _ := names(subj)
		v := g.pick(t.values)
		key := fill(t.say, "{V}", v)
		say(r, t.topic, key, false)
		add(Paraphrase, fill(t.para, "{S}", s), v, Evidence{r, key})
	}

	// Everything else is filler.
	for s := range c.Sessions {
		turns := c.Sessions[s].Turns
		seen := map[string]bool{}
		for t := range turns {
			if turns[t].Text != "" {
				continue
			}
			other := c.Names[1-t%2]
			switch {
			case t == 0:
				turns[t].Text = g.address(other, g.one(chitChat))
			case t == len(turns)-1:
				turns[t].Text = fill(g.one([]string{"Bye {O}! Talk soon.", "Okay {O}, gotta run. Bye!", "Night {O}!", "Talk later, {O}!"}), "{O}", other)
			default:
				turns[t].Text = g.filler(other, sessTopics[s], seen)
			}
		}
	}
	if err := c.check(); err != nil {
		return Conversation{}, err
	}
	return c, nil
}

// address puts the other speaker's name at the start or end of text, about
// half the time.
func (g *gen) address(other, text string) string {
	switch g.rng.IntN(4) {
	case 0, 1:
		op := fill(g.one(openers), "{O}", other)
		if strings.HasSuffix(op, "! ") {
			return op + text
		}
		return op + lowerFirst(text)
	case 2:
		if strings.HasSuffix(text, ".") {
			return strings.TrimSuffix(text, ".") + fill(g.one(closers), "{O}", other)
		}
	}
	return text
}

// filler returns one ordinary turn: chit-chat, a reaction, or one or two
// lines about the session's topics, not repeating a topic line the session
// already has (seen) when it can help it.
func (g *gen) filler(other string, topics []string, seen map[string]bool) string {
	switch n := g.rng.IntN(20); {
	case n < 4:
		return g.address(other, g.one(chitChat))
	case n < 6:
		r := g.one(reactions)
		if strings.HasSuffix(r, "?") {
			return other + ", " + r
		}
		return capitalise(r) + ", " + other + "!"
	}
	topicLine := func() string {
		var l string
		for range 6 {
			if l = g.one(topicFiller[g.one(topics)]); !seen[l] {
				break
			}
		}
		seen[l] = true
		return sentence(l)
	}
	// One to three lines, two most often, and now and then a reaction
	// first: turns of 10 to 45 tokens, like people typing to a friend.
	line := topicLine()
	switch g.rng.IntN(6) {
	case 0:
		line = capitalise(g.one(reactions)) + "! " + line
	case 1, 2:
		line += " " + topicLine() + " " + topicLine()
	default:
		line += " " + topicLine()
	}
	return g.address(other, line)
}

// sentence capitalises s and ends it with a full stop unless it is a
// question.
func sentence(s string) string {
	s = capitalise(s)
	if !strings.HasSuffix(s, "?") && !strings.HasSuffix(s, "!") {
		s += "."
	}
	return s
}

// lowerFirst lowers the first letter unless the word is "I" or a name.
func lowerFirst(s string) string {
	if s == "" || s == "I" || strings.HasPrefix(s, "I ") || strings.HasPrefix(s, "I'") {
		return s
	}
	first, _, _ := strings.Cut(s, " ")
	for _, n := range speakerNames {
		if strings.TrimRight(first, ",.!?") == n[0] || strings.TrimRight(first, ",.!?") == n[1] {
			return s
		}
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// check verifies that every evidence key occurs in its turn and in no other,
// so finding a key in a prompt means its turn got there.
func (c Conversation) check() error {
	norm := make([][]string, len(c.Sessions))
	for s, sess := range c.Sessions {
		for _, t := range sess.Turns {
			norm[s] = append(norm[s], " "+Normalize(t.Text)+" ")
		}
	}
	for _, q := range c.Questions {
		for _, e := range q.Evidence {
			k := " " + Normalize(e.Key) + " "
			for s := range norm {
				for t, text := range norm[s] {
					in := strings.Contains(text, k)
					if (Ref{s, t} == e.Ref) != in {
						return fmt.Errorf("synth: key %q of %s: in turn %d/%d = %v", e.Key, q.ID, s, t, in)
					}
				}
			}
		}
	}
	return nil
}

// Normalize folds text for matching: lower case, every run of characters
// other than letters and digits one space, trimmed.
func Normalize(s string) string {
	var b strings.Builder
	space := false
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = false
			b.WriteRune(r)
			continue
		}
		space = true
	}
	return b.String()
}

// Contains reports whether key occurs in text, both normalised, at word
// boundaries.
func Contains(text, key string) bool {
	return strings.Contains(" "+Normalize(text)+" ", " "+Normalize(key)+" ")
}
