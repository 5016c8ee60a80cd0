package synth

import (
	"reflect"
	"strings"
	"testing"
)

func mustGenerate(tb testing.TB, seed uint64, o Options) Conversation {
	tb.Helper()
	c, err := Generate(seed, "u1", o)
	if err != nil {
		tb.Fatalf("Generate(%d): %v", seed, err)
	}
	return c
}

func TestGenerateIsDeterministic(t *testing.T) {
	o := DefaultOptions()
	a, b := mustGenerate(t, 42, o), mustGenerate(t, 42, o)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two generations with seed 42 differ")
	}
	if c := mustGenerate(t, 43, o); reflect.DeepEqual(a.Sessions, c.Sessions) {
		t.Fatal("seeds 42 and 43 produced the same sessions")
	}
}

// The shape the issue asks for: 500+ turns, two speakers who call each
// other by name, distinct session dates, every type, evidence 300+ turns
// back, multi-hop evidence across sessions.
func TestGenerateShape(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		o := DefaultOptions()
		c := mustGenerate(t, seed, o)
		if n := c.Len(); n < 500 {
			t.Fatalf("seed %d: %d turns, want at least 500", seed, n)
		}
		named, dates := 0, map[string]bool{}
		for i, s := range c.Sessions {
			d := s.Date.Format("2006-01-02")
			if dates[d] {
				t.Errorf("seed %d: two sessions on %s", seed, d)
			}
			dates[d] = true
			for j, turn := range s.Turns {
				if turn.Speaker != j%2 || turn.Text == "" {
					t.Fatalf("seed %d: session %d turn %d: %+v", seed, i, j, turn)
				}
				if strings.Contains(turn.Text, c.Names[1-turn.Speaker]) {
					named++
				}
				if strings.ContainsAny(turn.Text, "{}") {
					t.Errorf("seed %d: unfilled placeholder in %q", seed, turn.Text)
				}
			}
		}
		if share := float64(named) / float64(c.Len()); share < 0.3 {
			t.Errorf("seed %d: %.0f%% of turns name the other speaker, want at least 30%%", seed, 100*share)
		}
		perType, deep := map[QType]int{}, 0
		for _, q := range c.Questions {
			perType[q.Type]++
			for _, e := range q.Evidence {
				if c.Depth(e.Ref) > 300 {
					deep++
				}
				if !Contains(c.Turn(e.Ref).Text, e.Key) {
					t.Errorf("seed %d: %s: evidence turn %q lacks its key %q", seed, q.ID, c.Turn(e.Ref).Text, e.Key)
				}
			}
			if !strings.Contains(q.Text, c.Names[0]) && !strings.Contains(q.Text, c.Names[1]) {
				t.Errorf("seed %d: question %q names neither speaker", seed, q.Text)
			}
			if q.Type == MultiHop && (len(q.Evidence) != 2 || q.Evidence[0].Ref.Session == q.Evidence[1].Ref.Session) {
				t.Errorf("seed %d: multi-hop %s evidence %+v is not two turns in two sessions", seed, q.ID, q.Evidence)
			}
		}
		for _, ty := range Types {
			if perType[ty] != o.PerType {
				t.Errorf("seed %d: %d %s questions, want %d", seed, perType[ty], ty, o.PerType)
			}
		}
		if deep < 10 {
			t.Errorf("seed %d: %d evidence turns more than 300 turns back, want at least 10", seed, deep)
		}
	}
}

// Paraphrased questions reuse none of the statement's content words; an
// adjacent question's answer turn shares none with the probe (its words
// are in the question turn before it); a temporal answer is the session's
// date shifted by the relative time.
func TestQuestionWording(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		c := mustGenerate(t, seed, DefaultOptions())
		for _, q := range c.Questions {
			switch q.Type {
			case Paraphrase, Adjacent:
				ev := c.Turn(q.Evidence[0].Ref).Text
				if shared := sharedContent(q.Text, ev); len(shared) > 0 {
					t.Errorf("seed %d: %s question %q shares %q with %q", seed, q.Type, q.Text, shared, ev)
				}
				if q.Type == Adjacent {
					prev := q.Evidence[0].Ref
					prev.Turn--
					if len(sharedContent(q.Text, c.Turn(prev).Text)) == 0 {
						t.Errorf("seed %d: adjacent question %q shares nothing with the question turn %q", seed, q.Text, c.Turn(prev).Text)
					}
				}
			case Temporal:
				d := c.Sessions[q.Evidence[0].Ref.Session].Date
				if q.Answer != d.Format("2 January 2006") && q.Answer != d.AddDate(0, 0, -1).Format("2 January 2006") &&
					q.Answer != d.AddDate(0, 0, -2).Format("2 January 2006") && q.Answer != d.AddDate(0, 0, -3).Format("2 January 2006") {
					t.Errorf("seed %d: temporal answer %s is not near the session date %s", seed, q.Answer, d)
				}
			}
		}
	}
}

// sharedContent returns the content words (lower case, three letters or
// more, not stop words, compared by their first five letters) a and b share.
func sharedContent(a, b string) []string {
	stems := map[string]bool{}
	for _, w := range strings.Fields(Normalize(b)) {
		if len(w) >= 3 && !stop[w] {
			stems[prefix(w)] = true
		}
	}
	var out []string
	for _, w := range strings.Fields(Normalize(a)) {
		if len(w) >= 3 && !stop[w] && stems[prefix(w)] {
			out = append(out, w)
		}
	}
	return out
}

func prefix(w string) string {
	r := []rune(w)
	return string(r[:min(5, len(r))])
}

var stop = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`the and for are was were has had have does did what which who whom when where why how their they them
his her she him you your our ours its that this with from into about after before just some any all now then than too very not
one ones get got out off over also been being can could would should will did doing`) {
		m[w] = true
	}
	return m
}()

func TestGenerateRejectsTooSmall(t *testing.T) {
	o := DefaultOptions()
	o.Sessions, o.TurnsPerSession = 4, 8
	if _, err := Generate(1, "u1", o); err == nil {
		t.Fatal("Generate accepted 32 turns for 50 questions")
	}
	o = DefaultOptions()
	o.TurnsPerSession = 31
	if _, err := Generate(1, "u1", o); err == nil {
		t.Fatal("Generate accepted an odd number of turns per session")
	}
}

func TestContains(t *testing.T) {
	tests := []struct {
		text, key string
		want      bool
	}{
		{"Hey Leo, we finally named the new puppy Biscuit!", "we finally named the new puppy Biscuit", true},
		{"[2023-03-04] Maya: we finally named the new puppy  Biscuit.", "We finally named the new puppy Biscuit", true},
		{"we finally named the new puppy Biscuits", "we finally named the new puppy Biscuit", false},
		{"we finally named the new puppy", "we finally named the new puppy Biscuit", false},
		{"Tromsø in the end", "Tromsø in the end", true},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			if got := Contains(tt.text, tt.key); got != tt.want {
				t.Fatalf("Contains(%q, %q) = %v", tt.text, tt.key, got)
			}
		})
	}
}
