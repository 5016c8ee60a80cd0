package enrich

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// PinCount is a confusion count of pin detection.
type PinCount struct{ TP, FP, FN, TN int }

// Precision is TP/(TP+FP), 1 when nothing was pinned.
func (c PinCount) Precision() float64 { return ratio(c.TP, c.FP) }

// Recall is TP/(TP+FN), 1 when nothing should have been.
func (c PinCount) Recall() float64 { return ratio(c.TP, c.FN) }

func ratio(a, b int) float64 {
	if a+b == 0 {
		return 1
	}
	return float64(a) / float64(a+b)
}

// PinScore is what MeasurePins reports: counts overall ("all") and per
// language ("en", "pt"), and the sentences it got wrong.
type PinScore struct {
	ByLang        map[string]*PinCount
	Missed, False []string
}

// MeasurePins runs DetectPins over a labelled set: lines of
// label<TAB>lang<TAB>sentence, label "pin" or "standing" for a sentence
// that should be pinned and "no" or "not" for one that should not, lang
// "en" or "pt"; empty lines and lines starting with '#' are skipped.
func MeasurePins(r io.Reader) (PinScore, error) {
	s := PinScore{ByLang: map[string]*PinCount{"all": {}, "en": {}, "pt": {}}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 || s.ByLang[f[1]] == nil || f[1] == "all" {
			return PinScore{}, fmt.Errorf("line %d: want label<TAB>en|pt<TAB>sentence", n)
		}
		var want bool
		switch f[0] {
		case "pin", "standing":
			want = true
		case "no", "not":
		default:
			return PinScore{}, fmt.Errorf("line %d: label %q: want pin, standing, no or not", n, f[0])
		}
		got := len(DetectPins(f[2])) > 0
		for _, c := range []*PinCount{s.ByLang["all"], s.ByLang[f[1]]} {
			switch {
			case want && got:
				c.TP++
			case !want && got:
				c.FP++
			case want && !got:
				c.FN++
			default:
				c.TN++
			}
		}
		switch {
		case want && !got:
			s.Missed = append(s.Missed, f[2])
		case !want && got:
			s.False = append(s.False, f[2])
		}
	}
	return s, sc.Err()
}
