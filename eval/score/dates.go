package score

import (
	"time"

	"github.com/memgate/memgate/eval/synth"
)

// dateLayouts are the spellings of a date Judge recognises.
var dateLayouts = []string{"2006-01-02", "2 January 2006", "January 2, 2006", "2 Jan 2006", "Jan 2, 2006", "Monday, 2 January 2006", "Mon 2 Jan 2006"}

// DateForms returns the normalised spellings of t's date (synth.Normalize).
func DateForms(t time.Time) []string {
	out := make([]string, 0, len(dateLayouts))
	for _, l := range dateLayouts {
		out = append(out, synth.Normalize(t.Format(l)))
	}
	return out
}
