package score

import "github.com/memgate/memgate/eval/synth"

// ratio is covered of total.
type ratio struct{ covered, total int }

func (r *ratio) add(ok bool) {
	r.total++
	if ok {
		r.covered++
	}
}

func (r ratio) value() (float64, bool) {
	if r.total == 0 {
		return 0, false
	}
	return float64(r.covered) / float64(r.total), true
}

// Tally accumulates the outcomes of one method at one budget.
type Tally struct {
	all     ratio
	byType  map[synth.QType]*ratio
	byDepth map[string]*ratio
	dated   ratio
	tokens  int
	prompts int
}

// Add records the outcomes of one question and the tokens its prompt cost.
func (t *Tally) Add(outs []Outcome, tokens int) {
	if t.byType == nil {
		t.byType, t.byDepth = map[synth.QType]*ratio{}, map[string]*ratio{}
	}
	for _, o := range outs {
		t.all.add(o.Covered)
		get(t.byType, o.Type).add(o.Covered)
		get(t.byDepth, Bucket(o.Depth)).add(o.Covered)
		if o.Type == synth.Temporal {
			t.dated.add(o.Dated)
		}
	}
	t.tokens += tokens
	t.prompts++
}

func get[K comparable](m map[K]*ratio, k K) *ratio {
	r, ok := m[k]
	if !ok {
		r = &ratio{}
		m[k] = r
	}
	return r
}

// Overall returns the share of evidence turns covered.
func (t *Tally) Overall() float64 { v, _ := t.all.value(); return v }

// Type returns the coverage of questions of type q, and whether there were any.
func (t *Tally) Type(q synth.QType) (float64, bool) {
	if r, ok := t.byType[q]; ok {
		return r.value()
	}
	return 0, false
}

// Depth returns the coverage of evidence in a depth bucket, and whether
// there was any.
func (t *Tally) Depth(bucket string) (float64, bool) {
	if r, ok := t.byDepth[bucket]; ok {
		return r.value()
	}
	return 0, false
}

// Dated returns the share of temporal evidence turns covered with their
// date, and whether there were any.
func (t *Tally) Dated() (float64, bool) { return t.dated.value() }

// MeanTokens returns the mean prompt tokens per question.
func (t *Tally) MeanTokens() float64 {
	if t.prompts == 0 {
		return 0
	}
	return float64(t.tokens) / float64(t.prompts)
}

// Evidence returns how many evidence turns were judged.
func (t *Tally) Evidence() int { return t.all.total }
