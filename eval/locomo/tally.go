package locomo

// Ratio counts judged evidence turns and the covered ones.
type Ratio struct{ Covered, Total int }

// Value is Covered/Total, with ok false when nothing was judged.
func (r Ratio) Value() (v float64, ok bool) {
	if r.Total == 0 {
		return 0, false
	}
	return float64(r.Covered) / float64(r.Total), true
}

func (r *Ratio) add(ok bool) {
	r.Total++
	if ok {
		r.Covered++
	}
}

// Tally is the coverage of one method: overall, by question category and by
// depth bucket, with the prompts' token counts.
type Tally struct {
	All        Ratio
	ByCategory map[int]*Ratio
	ByDepth    map[string]*Ratio
	// Prompts, Tokens and MaxTokens describe the judged prompts;
	// OverBudget counts those above their budget.
	Prompts, Tokens, MaxTokens, OverBudget int
}

// NewTally returns an empty Tally.
func NewTally() *Tally {
	return &Tally{ByCategory: map[int]*Ratio{}, ByDepth: map[string]*Ratio{}}
}

// Add records one evidence turn of a question of category, said
// sessionsAgo sessions before the last.
func (t *Tally) Add(category, sessionsAgo int, covered bool) {
	t.All.add(covered)
	ratio(t.ByCategory, category).add(covered)
	ratio(t.ByDepth, DepthBucket(sessionsAgo)).add(covered)
}

// AddPrompt records one judged prompt of tokens within budget.
func (t *Tally) AddPrompt(tokens, budget int) {
	t.Prompts++
	t.Tokens += tokens
	t.MaxTokens = max(t.MaxTokens, tokens)
	if budget > 0 && tokens > budget {
		t.OverBudget++
	}
}

// MeanTokens is the judged prompts' mean token count.
func (t *Tally) MeanTokens() float64 {
	if t.Prompts == 0 {
		return 0
	}
	return float64(t.Tokens) / float64(t.Prompts)
}

func ratio[K comparable](m map[K]*Ratio, k K) *Ratio {
	r, ok := m[k]
	if !ok {
		r = &Ratio{}
		m[k] = r
	}
	return r
}
