package score

import "github.com/memgate/memgate/eval/synth"

// Tally accumulates outcomes of one method at one budget.
type Tally struct {
	covered, total map[synth.Category]int
	stale, changed int
	tokens, n      int
	sources        map[string]int
}

// Add records an outcome.
func (t *Tally) Add(o Outcome) {
	if t.total == nil {
		t.covered, t.total = map[synth.Category]int{}, map[synth.Category]int{}
	}
	t.total[o.Category]++
	if o.Covered {
		t.covered[o.Category]++
	}
	if o.Changed {
		t.changed++
		if o.Stale {
			t.stale++
		}
	}
	t.tokens += o.Tokens
	t.n++
	if t.sources == nil {
		t.sources = map[string]int{}
	}
	for _, s := range o.Sources {
		t.sources[s]++
	}
}

// Source returns the share of probes whose winning value was found in
// source (see Outcome.Sources); a probe may count for several sources.
func (t *Tally) Source(source string) float64 {
	if t.n == 0 {
		return 0
	}
	return float64(t.sources[source]) / float64(t.n)
}

// Coverage returns the share of covered probes in cat, and whether any
// probe of cat was recorded.
func (t *Tally) Coverage(cat synth.Category) (float64, bool) {
	if t.total[cat] == 0 {
		return 0, false
	}
	return float64(t.covered[cat]) / float64(t.total[cat]), true
}

// Overall returns the share of covered probes over all categories.
func (t *Tally) Overall() float64 {
	c, n := 0, 0
	for cat, k := range t.total {
		c += t.covered[cat]
		n += k
	}
	if n == 0 {
		return 0
	}
	return float64(c) / float64(n)
}

// StaleRate returns the share of changed-fact probes judged stale, and
// whether there were any.
func (t *Tally) StaleRate() (float64, bool) {
	if t.changed == 0 {
		return 0, false
	}
	return float64(t.stale) / float64(t.changed), true
}

// MeanTokens returns the mean prompt tokens per probe.
func (t *Tally) MeanTokens() float64 {
	if t.n == 0 {
		return 0
	}
	return float64(t.tokens) / float64(t.n)
}

// Probes returns how many outcomes were added.
func (t *Tally) Probes() int { return t.n }
