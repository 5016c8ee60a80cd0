package compaction

import (
	"os"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

func TestDetectPins(t *testing.T) {
	tests := []struct {
		text string
		typ  memory.FactType
		key  string // "" means the normalised sentence
		want string // the value, or "" for no pin
	}{
		{"Hi! I want to save R$ 5.000 by June. Thanks.", memory.FactGoal, "", "I want to save R$ 5.000 by June."},
		{"Remind me if my card bill goes over 800 euros", memory.FactGoal, "", "Remind me if my card bill goes over 800 euros"},
		{"Honestly I prefer window seats on trains.", memory.FactPreference, "", "Honestly I prefer window seats on trains."},
		{"After a long talk, I decided to sell the car.", memory.FactDecision, "", "After a long talk, I decided to sell the car."},
		{"Quero economizar 300 reais por mês.", memory.FactGoal, "", "Quero economizar 300 reais por mês."},
		{"Me avise se o aluguel subir.", memory.FactGoal, "", "Me avise se o aluguel subir."},
		{"Prefiro respostas curtas.", memory.FactPreference, "", "Prefiro respostas curtas."},
		{"Decidi cancelar a academia.", memory.FactDecision, "", "Decidi cancelar a academia."},
		{"I live in Lisbon.", memory.FactProfile, "city", "I live in Lisbon."},
		{"Last month I moved to Porto.", memory.FactProfile, "city", "Last month I moved to Porto."},
		{"I'm allergic to peanuts.", memory.FactLimit, "", "I'm allergic to peanuts."},
		{"Meu nome é Joana.", memory.FactProfile, "name", "Meu nome é Joana."},
		{"Minha meta é correr 10 km.", memory.FactGoal, "", "Minha meta é correr 10 km."},
		{"I want to know the capital of Peru.", "", "", ""},
		{"I need to convert 5 miles to km.", "", "", ""},
		{"I'd like a recipe for banana bread.", "", "", ""},
		{"Quero saber a capital do Peru.", "", "", ""},
		{"I love it, thanks!", "", "", ""},
		{"What's the weather like?", "", "", ""},
		{"Do you think I want to save more?", "", "", ""},
		{"The price went from 3.5 to 4.2 yesterday.", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			got := DetectPins(tt.text)
			if tt.want == "" {
				if len(got) != 0 {
					t.Fatalf("pins = %+v, want none", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("pins = %+v, want one", got)
			}
			f := got[0]
			wantKey := tt.key
			if wantKey == "" {
				wantKey = NormalizeKey(tt.want)
			}
			if f.Type != tt.typ || f.Value != tt.want || f.Key != wantKey || !f.Pinned {
				t.Fatalf("pin = %+v, want type %s key %q value %q", f, tt.typ, wantKey, tt.want)
			}
		})
	}
}

func TestDetectPinsClauses(t *testing.T) {
	tests := []struct {
		text string
		want []string // type/key=value
	}{
		{"I live in Lisbon and I'm vegetarian.", []string{"profile/city=I live in Lisbon.", "profile/diet=I'm vegetarian."}},
		{"I work as a nurse, and I always prefer night shifts.", []string{"profile/job=I work as a nurse.", "preference/i always prefer night shifts=I always prefer night shifts."}},
		{"I'm a pescatarian.", []string{"profile/diet=I'm a pescatarian."}},
		{"I want to save R$ 5.000 by June.", []string{"goal/i want to save r 5 000 by june=I want to save R$ 5.000 by June."}},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			var got []string
			for _, f := range DetectPins(tt.text) {
				got = append(got, string(f.Type)+"/"+f.Key+"="+f.Value)
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestSentencesKeepNumbers(t *testing.T) {
	got := Sentences("Save R$ 5.000 by June. Pi is 3.14! Ok?\nnext line")
	want := []string{"Save R$ 5.000 by June.", "Pi is 3.14!", "Ok?", "next line"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestPinValueBounded(t *testing.T) {
	long := "I decided " + strings.Repeat("ção ", 200)
	got := DetectPins(long)
	if len(got) != 1 || len(got[0].Value) > maxPinLen || len(got[0].Key) > 80 {
		t.Fatalf("unbounded pin: %d bytes", len(got[0].Value))
	}
	if !strings.HasPrefix(got[0].Value, "I decided") {
		t.Fatal("lost the start of the sentence")
	}
}

// Thresholds of TestPinPrecisionRecall. A false pin costs its tokens in
// every later prompt of the user, for good, and crowds out real memory (the
// issue found 24 one-off requests pinned at 261 tokens a prompt); a missed
// pin still reaches the model through summaries, facts and recall. So
// precision is held high — at most one false pin in twenty — and recall
// only reasonably so.
const (
	minPinPrecision = 0.95
	minPinRecall    = 0.85
)

// TestPinPrecisionRecall measures DetectPins on the labelled English and
// Portuguese sentences of testdata/pins.tsv: a sentence counts as pinned
// when DetectPins returns any fact for it.
func TestPinPrecisionRecall(t *testing.T) {
	b, err := os.ReadFile("testdata/pins.tsv")
	if err != nil {
		t.Fatal(err)
	}
	type count struct{ tp, fp, fn, tn int }
	per := map[string]*count{"all": {}, "en": {}, "pt": {}}
	n := 0
	for i, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 || (f[0] != "pin" && f[0] != "no") || per[f[1]] == nil {
			t.Fatalf("line %d: want label<TAB>lang<TAB>sentence: %q", i+1, line)
		}
		n++
		want, got := f[0] == "pin", len(DetectPins(f[2])) > 0
		for _, c := range []*count{per["all"], per[f[1]]} {
			switch {
			case want && got:
				c.tp++
			case !want && got:
				c.fp++
			case want && !got:
				c.fn++
			default:
				c.tn++
			}
		}
		switch {
		case !want && got:
			t.Logf("false pin: %q", f[2])
		case want && !got:
			t.Logf("missed pin: %q", f[2])
		}
	}
	if n < 100 {
		t.Fatalf("%d labelled sentences, want at least 100", n)
	}
	ratio := func(a, b int) float64 {
		if a+b == 0 {
			return 1
		}
		return float64(a) / float64(a+b)
	}
	for _, k := range []string{"all", "en", "pt"} {
		c := per[k]
		t.Logf("%-3s precision %.3f recall %.3f (tp %d fp %d fn %d tn %d)", k, ratio(c.tp, c.fp), ratio(c.tp, c.fn), c.tp, c.fp, c.fn, c.tn)
	}
	all := per["all"]
	if p := ratio(all.tp, all.fp); p < minPinPrecision {
		t.Errorf("precision %.3f, want at least %.2f", p, minPinPrecision)
	}
	if r := ratio(all.tp, all.fn); r < minPinRecall {
		t.Errorf("recall %.3f, want at least %.2f", r, minPinRecall)
	}
}
