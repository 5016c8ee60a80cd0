package synth

import (
	"reflect"
	"slices"
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

func TestGenerateShape(t *testing.T) {
	o := DefaultOptions()
	c := mustGenerate(t, 7, o)
	if len(c.Sessions) != o.Sessions {
		t.Fatalf("%d sessions, want %d", len(c.Sessions), o.Sessions)
	}
	seen := map[string]bool{}
	for i, s := range c.Sessions {
		if len(s.Turns) != o.TurnsPerSession {
			t.Errorf("session %d has %d turns", i, len(s.Turns))
		}
		if seen[s.Conversation] {
			t.Errorf("conversation id %s repeated", s.Conversation)
		}
		seen[s.Conversation] = true
		if i > 0 && !s.Date.After(c.Sessions[i-1].Date) {
			t.Errorf("session %d is not dated after session %d", i, i-1)
		}
	}
	perCat := map[Category]int{}
	styles := map[string]map[string]bool{}
	for _, p := range c.Probes {
		perCat[p.Category]++
		if styles[p.ItemID] == nil {
			styles[p.ItemID] = map[string]bool{}
		}
		styles[p.ItemID][p.Style] = true
	}
	for _, cat := range Categories {
		if perCat[cat] != 2*o.ItemsPerCategory {
			t.Errorf("%s: %d probes, want %d", cat, perCat[cat], 2*o.ItemsPerCategory)
		}
	}
	for _, it := range c.Items {
		if !styles[it.ID][Direct] || !styles[it.ID][Indirect] {
			t.Errorf("item %s probes: %v, want one direct and one indirect", it.ID, styles[it.ID])
		}
	}
}

// Every probe references a planted item that exists, whose value is stated
// in the probe's evidence turns and nowhere else, and a changed fact's old
// value is stated before the winning one.
func TestProbesReferencePlantedItems(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		c := mustGenerate(t, seed, DefaultOptions())
		for _, p := range c.Probes {
			it, ok := c.Item(p.ItemID)
			if !ok {
				t.Fatalf("seed %d: probe %q references missing item %s", seed, p.Question, p.ItemID)
			}
			if p.Want != it.Value || p.Category != it.Category || len(p.Evidence) == 0 {
				t.Fatalf("seed %d: probe %+v does not match item %+v", seed, p, it)
			}
			for _, r := range p.Evidence {
				if !slices.Contains(it.Planted, r) {
					t.Errorf("seed %d: evidence %v of %s is not a planted turn", seed, r, it.ID)
				}
				if !Contains(c.Turn(r), p.Want) {
					t.Errorf("seed %d: evidence turn %q lacks %q", seed, c.Turn(r), p.Want)
				}
			}
			if p.Question == "" {
				t.Fatalf("seed %d: empty %s question for %s", seed, p.Style, p.ItemID)
			}
			if Contains(p.Question, p.Want) {
				t.Errorf("seed %d: question %q contains its answer", seed, p.Question)
			}
			if it.Category == Changed {
				if len(it.Planted) != 2 || len(p.Stale) != 1 {
					t.Fatalf("seed %d: changed fact %+v", seed, it)
				}
				old, cur := it.Planted[0], it.Planted[1]
				if old.Session >= cur.Session {
					t.Errorf("seed %d: %s changes in session %d, not after session %d", seed, it.ID, cur.Session, old.Session)
				}
				if !Contains(c.Turn(old), p.Stale[0]) || Contains(c.Turn(cur), p.Stale[0]) {
					t.Errorf("seed %d: old value %q must be in %q only, not in %q", seed, p.Stale[0], c.Turn(old), c.Turn(cur))
				}
			}
			// The value occurs nowhere but in the planted turns.
			for s, sess := range c.Sessions {
				for ti, turn := range sess.Turns {
					if Contains(turn, p.Want) && !slices.Contains(it.Planted, Ref{s, ti}) {
						t.Errorf("seed %d: %q also in unplanted turn %q", seed, p.Want, turn)
					}
				}
			}
		}
	}
}

func TestGenerateRejectsTooSmall(t *testing.T) {
	o := DefaultOptions()
	o.Sessions, o.TurnsPerSession = 2, 3
	if _, err := Generate(1, "u1", o); err == nil {
		t.Fatal("Generate accepted 6 turns for 21 planted statements")
	}
}

func TestContains(t *testing.T) {
	tests := []struct {
		text, v string
		want    bool
	}{
		{"I want to save R$ 5.000 by June", "5.000", true},
		{"I want to save R$ 15.000 by June", "5.000", false},
		{"she said 5.0001", "5.000", false},
		{"I moved to PORTO last month", "Porto", true},
		{"Portobello road", "Porto", false},
		{"a banana", "Ana", false},
		{"Ana, my sister", "Ana", true},
		{"visiting on 12 March.", "12 March", true},
		{"visiting on 12 Marchx", "12 March", false},
		{"Prefiro filmes de comédia.", "comédia", true},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			if got := Contains(tt.text, tt.v); got != tt.want {
				t.Fatalf("Contains(%q, %q) = %v", tt.text, tt.v, got)
			}
		})
	}
}
