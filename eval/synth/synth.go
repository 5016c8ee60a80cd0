// Package synth generates long synthetic conversations for the memory-quality
// evaluation: one user talking to an assistant over many dated sessions, with
// items planted at varying depths — amounts, dates, names, preferences, goals
// and facts that later change — buried in ordinary chatter, and two probe
// questions per item (one reusing the statement's words, one not) tied to
// the turn(s) that answer them.
//
// Generation is a pure function of the seed and the options: the same inputs
// always produce the same conversation, byte for byte.
package synth

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Category groups probes for reporting.
type Category string

// The probe categories, in report order.
const (
	Numbers     Category = "numbers"
	Dates       Category = "dates"
	Names       Category = "names"
	Preferences Category = "preferences"
	Goals       Category = "goals"
	Changed     Category = "changed"
)

// Categories lists every category in report order.
var Categories = []Category{Numbers, Dates, Names, Preferences, Goals, Changed}

// Options shape a generated conversation.
type Options struct {
	// Sessions is the number of sessions (conversations) per user.
	Sessions int
	// TurnsPerSession is the number of user turns in each session.
	TurnsPerSession int
	// ItemsPerCategory is how many items of each category are planted.
	ItemsPerCategory int
	// Start is the date of the first session.
	Start time.Time
}

// DefaultOptions are the options of the reported run.
func DefaultOptions() Options {
	return Options{
		Sessions:         12,
		TurnsPerSession:  14,
		ItemsPerCategory: 3,
		Start:            time.Date(2026, time.January, 5, 0, 0, 0, 0, time.UTC),
	}
}

// Ref points at one user turn: session index and turn index within it.
type Ref struct {
	Session int `json:"session"`
	Turn    int `json:"turn"`
}

// Session is one conversation of the user, on one day.
type Session struct {
	// Conversation is the conversation id the session is replayed under.
	Conversation string
	// Date is the session's (narrative) date.
	Date time.Time
	// Turns are the user's messages, in order.
	Turns []string
}

// Item is one planted piece of information.
type Item struct {
	ID       string
	Category Category
	// Value is the answer-bearing text that must reach the prompt (matched
	// case-insensitively at word boundaries).
	Value string
	// Superseded are values that were true before and must not be presented
	// as current (changed facts only).
	Superseded []string
	// Planted are the turns stating the item, oldest first; for a changed
	// fact the last one states the winning value.
	Planted []Ref
}

// The probe styles.
const (
	// Direct questions reuse the words of the statement ("How much do I pay
	// in rent?" for "My rent is €1,240").
	Direct = "direct"
	// Indirect questions need the value without naming its topic's words
	// ("Is my housing cost reasonable?").
	Indirect = "indirect"
)

// Probe is a question whose answer is one item's Value.
type Probe struct {
	ItemID   string
	Category Category
	// Style is Direct or Indirect; every item gets one probe of each.
	Style    string
	Question string
	// Want is the value that answers the question.
	Want string
	// Stale are superseded values (changed facts only).
	Stale []string
	// Evidence are the turns that answer the question (for a changed fact,
	// the one that must win).
	Evidence []Ref
}

// Conversation is everything generated for one user.
type Conversation struct {
	Seed     uint64
	User     string
	Sessions []Session
	Items    []Item
	Probes   []Probe
}

// Turn returns the user message at r.
func (c Conversation) Turn(r Ref) string { return c.Sessions[r.Session].Turns[r.Turn] }

// Item returns the item with id, and whether it exists.
func (c Conversation) Item(id string) (Item, bool) {
	for _, it := range c.Items {
		if it.ID == id {
			return it, true
		}
	}
	return Item{}, false
}

// Generate returns the conversation of user for seed. It fails when the
// options leave too few turns for the planted items.
func Generate(seed uint64, user string, o Options) (Conversation, error) {
	total := o.Sessions * o.TurnsPerSession
	need := o.ItemsPerCategory * (len(Categories) + 1) // a changed fact takes two turns
	if o.Sessions < 2 || o.TurnsPerSession < 1 || o.ItemsPerCategory < 1 || need > total/2 {
		return Conversation{}, fmt.Errorf("synth: %d sessions of %d turns cannot hold %d planted statements", o.Sessions, o.TurnsPerSession, need)
	}
	if o.ItemsPerCategory > minBank() {
		return Conversation{}, fmt.Errorf("synth: at most %d items per category", minBank())
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	g := &gen{rng: rng, used: map[string]bool{}}
	c := Conversation{Seed: seed, User: user}

	// Chatter everywhere first; planted statements replace some of it.
	date := o.Start
	for s := range o.Sessions {
		turns := make([]string, o.TurnsPerSession)
		for t := range turns {
			turns[t] = g.chatter()
		}
		c.Sessions = append(c.Sessions, Session{
			Conversation: fmt.Sprintf("%s-s%02d", user, s+1),
			Date:         date,
			Turns:        turns,
		})
		date = date.AddDate(0, 0, 4+rng.IntN(6))
	}

	free := make([]Ref, 0, total)
	for s := range o.Sessions {
		for t := range o.TurnsPerSession {
			free = append(free, Ref{s, t})
		}
	}
	take := func(pred func(Ref) bool) (Ref, error) {
		var cands []int
		for i, r := range free {
			if pred(r) {
				cands = append(cands, i)
			}
		}
		if len(cands) == 0 {
			return Ref{}, fmt.Errorf("synth: no free turn left")
		}
		i := cands[rng.IntN(len(cands))]
		r := free[i]
		free = slices.Delete(free, i, i+1)
		return r, nil
	}
	anywhere := func(Ref) bool { return true }

	n := 0
	for _, cat := range Categories {
		bank := banks[cat]
		for _, bi := range rng.Perm(len(bank))[:o.ItemsPerCategory] {
			n++
			p := bank[bi](g)
			id := fmt.Sprintf("%s-%s-%d", user, cat, n)
			it := Item{ID: id, Category: cat, Value: p.value}
			pr := Probe{ItemID: id, Category: cat, Style: Direct, Question: p.question, Want: p.value}
			if p.old == "" {
				r, err := take(anywhere)
				if err != nil {
					return Conversation{}, err
				}
				c.Sessions[r.Session].Turns[r.Turn] = g.bury(p.statement)
				it.Planted = []Ref{r}
				pr.Evidence = []Ref{r}
			} else {
				// The old value is stated in the first two thirds, the new
				// one in a later session.
				limit := max(1, o.Sessions*2/3)
				r1, err := take(func(r Ref) bool { return r.Session < limit })
				if err != nil {
					return Conversation{}, err
				}
				r2, err := take(func(r Ref) bool { return r.Session > r1.Session })
				if err != nil {
					return Conversation{}, err
				}
				c.Sessions[r1.Session].Turns[r1.Turn] = g.bury(p.oldStatement)
				c.Sessions[r2.Session].Turns[r2.Turn] = g.bury(p.statement)
				it.Superseded = []string{p.old}
				it.Planted = []Ref{r1, r2}
				pr.Stale = []string{p.old}
				pr.Evidence = []Ref{r2}
			}
			c.Items = append(c.Items, it)
			ind := pr
			ind.Style, ind.Question = Indirect, p.indirect
			c.Probes = append(c.Probes, pr, ind)
		}
	}
	if err := c.check(); err != nil {
		return Conversation{}, err
	}
	return c, nil
}

// check verifies that every item's values occur in the user's turns only
// where they were planted, so finding a value in a prompt means its evidence
// got there.
func (c Conversation) check() error {
	lower := make([][]string, len(c.Sessions))
	for s, sess := range c.Sessions {
		for _, turn := range sess.Turns {
			lower[s] = append(lower[s], strings.ToLower(turn))
		}
	}
	for _, it := range c.Items {
		for _, v := range append([]string{it.Value}, it.Superseded...) {
			lv := strings.ToLower(v)
			var re *regexp.Regexp
			for s, sess := range c.Sessions {
				for t, turn := range sess.Turns {
					if !strings.Contains(lower[s][t], lv) || slices.Contains(it.Planted, Ref{s, t}) {
						continue
					}
					if re == nil {
						re = ValuePattern(v)
					}
					if re.MatchString(turn) {
						return fmt.Errorf("synth: value %q of %s also occurs in session %d turn %d: %q", v, it.ID, s, t, turn)
					}
				}
			}
		}
		for _, p := range c.Probes {
			if p.ItemID == it.ID && Contains(p.Question, it.Value) {
				return fmt.Errorf("synth: probe for %s gives its answer away", it.ID)
			}
		}
	}
	return nil
}

// ValuePattern matches v case-insensitively where it is not part of a longer
// word or number.
func ValuePattern(v string) *regexp.Regexp {
	return regexp.MustCompile(`(?i)(?:^|[^\p{L}\p{N}])` + regexp.QuoteMeta(v) + `(?:$|[^\p{L}\p{N}])`)
}

// Contains reports whether text contains v as ValuePattern matches it.
func Contains(text, v string) bool {
	if !strings.Contains(strings.ToLower(text), strings.ToLower(v)) {
		return false
	}
	return ValuePattern(v).MatchString(text)
}
