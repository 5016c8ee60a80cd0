package compaction

import (
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
