package lexicon

import (
	"bytes"
	"compress/gzip"
	"slices"
	"strings"
	"testing"
)

func mustDefault(tb testing.TB) *Lexicon {
	tb.Helper()
	lx, err := Default()
	if err != nil {
		tb.Fatal(err)
	}
	return lx
}

func conceptWords(cs Concepts) []string {
	out := make([]string, cs.Len())
	for i := range out {
		out[i] = cs.At(i).Word
	}
	return out
}

func TestLookupKnowsWordNetConcepts(t *testing.T) {
	lx := mustDefault(t)
	tests := []struct {
		word, base string
		want       []string // among the concepts
	}{
		{"viola", "viola", []string{"instrument", "stringed"}},
		{"sister", "sister", []string{"sibling", "relative"}},
		{"sisters", "sister", []string{"sibling"}},
		{"husband", "husband", []string{"spouse"}},
		{"oolong", "oolong", []string{"tea"}},
		{"tea", "tea", []string{"beverage", "drink"}},
		{"pharmacist", "pharmacist", []string{"druggist", "professional"}},
		{"greyhound", "greyhound", []string{"dog", "hound", "animal"}},
		{"mice", "mouse", []string{"rodent", "mammal"}},
		{"children", "child", []string{"kid"}},
		{"practising", "practise", []string{"rehearse"}},
		{"hired", "hire", []string{"employ"}},
		{"car", "car", []string{"automobile", "vehicle"}},
		{"drives", "drive", []string{"vehicle"}}, // from the definition
		{"wednesday", "wednesday", []string{"weekday"}},
	}
	for _, tt := range tests {
		t.Run(tt.word, func(t *testing.T) {
			base, cs := lx.Lookup(tt.word)
			if base != tt.base {
				t.Errorf("base = %q, want %q", base, tt.base)
			}
			got := conceptWords(cs)
			for _, w := range tt.want {
				if !slices.Contains(got, w) {
					t.Errorf("concepts %v lack %q", got, w)
				}
			}
			if slices.Contains(got, tt.base) {
				t.Errorf("concepts %v hold the word itself", got)
			}
			for i := range cs.Len() {
				c := cs.At(i)
				if c.Weight <= 0 || c.Weight > 1 || (i > 0 && c.Weight > cs.At(i-1).Weight) {
					t.Fatalf("weights not in (0, 1] best first: %v", got)
				}
			}
		})
	}
}

func TestLookupIgnoresFunctionAndUnknownWords(t *testing.T) {
	lx := mustDefault(t)
	for _, w := range []string{"the", "who", "have", "can", "it", "don", "xyzzyq", "carla", "lisboeta", ""} {
		if base, cs := lx.Lookup(w); base != "" || cs.Len() != 0 {
			t.Errorf("Lookup(%q) = %q, %v; want nothing", w, base, conceptWords(cs))
		}
	}
}

// TestTableLeavesOutAbstractConcepts checks the generator's cut: the top of
// WordNet's noun hierarchy says nothing about what a text is about.
func TestTableLeavesOutAbstractConcepts(t *testing.T) {
	lx := mustDefault(t)
	if lx.Len() < 50000 {
		t.Fatalf("table holds %d words, want the WordNet nouns and verbs", lx.Len())
	}
	for w, e := range lx.words {
		for _, c := range conceptWords(lx.concepts(e)) {
			if c == "entity" {
				t.Fatalf("%q has the concept %q", w, c)
			}
		}
	}
	// Words whose hypernyms climb to the root through these.
	abstract := []string{"entity", "physical", "whole", "abstraction", "organism", "living"}
	for _, w := range []string{"dog", "car", "viola", "meeting", "idea"} {
		_, cs := lx.Lookup(w)
		for _, c := range conceptWords(cs) {
			if slices.Contains(abstract, c) {
				t.Errorf("%q has the abstract concept %q", w, c)
			}
		}
	}
}

func gz(tb testing.TB, s string) []byte {
	tb.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(s))
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return b.Bytes()
}

func TestParse(t *testing.T) {
	good := Header + "\n2\ninstrument\nstringed\n1\nviola 0:66 1:255\n1\nviolas viola\n"
	lx, err := Parse(gz(t, good))
	if err != nil {
		t.Fatal(err)
	}
	base, cs := lx.Lookup("violas")
	if base != "viola" || cs.Len() != 2 || cs.At(0).Word != "instrument" || cs.At(1).Weight != 1 {
		t.Fatalf("Lookup(violas) = %q, %v", base, conceptWords(cs))
	}
	bad := map[string]string{
		"header":        "memgate-lexicon 0\n0\n0\n0\n",
		"truncated":     Header + "\n2\ninstrument\n",
		"concept range": Header + "\n1\ninstrument\n1\nviola 1:66\n0\n",
		"weight range":  Header + "\n1\ninstrument\n1\nviola 0:256\n0\n",
		"no concepts":   Header + "\n1\ninstrument\n1\nviola\n0\n",
		"count":         Header + "\nmany\n",
		"exception":     Header + "\n0\n0\n1\nviolas\n",
	}
	for name, s := range bad {
		if _, err := Parse(gz(t, s)); err == nil {
			t.Errorf("%s: Parse accepted %q", name, s)
		}
	}
	if _, err := Parse([]byte("not gzip")); err == nil || !strings.Contains(err.Error(), "lexicon") {
		t.Errorf("Parse(not gzip) = %v", err)
	}
}

func BenchmarkDefaultParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(table); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLookup(b *testing.B) {
	lx := mustDefault(b)
	words := strings.Fields("I have been practising the viola and my sister Carla got hired as a pharmacist in Lisbon")
	b.ReportAllocs()
	for b.Loop() {
		for _, w := range words {
			lx.Lookup(strings.ToLower(w))
		}
	}
}

func TestNarrower(t *testing.T) {
	lx := mustDefault(t)
	tests := []struct {
		word string
		want []string // among the narrower words
	}{
		{"instrument", []string{"trombone", "accordion"}},
		{"instruments", []string{"trombone"}}, // by its base form
		{"sibling", []string{"brother", "sister"}},
		{"weekday", []string{"monday", "thursday"}},
		{"dog", []string{"puppy", "greyhound"}},
		{"fruit", []string{"mango"}},
	}
	for _, tt := range tests {
		t.Run(tt.word, func(t *testing.T) {
			ns := lx.Narrower(tt.word)
			got := conceptWords(ns)
			for _, w := range tt.want {
				if !slices.Contains(got, w) {
					t.Errorf("%d narrower words lack %q", len(got), w)
				}
			}
			for i := range ns.Len() {
				c := ns.At(i)
				if c.Weight <= 0 || c.Weight > 1 || (i > 0 && c.Weight > ns.At(i-1).Weight) {
					t.Fatalf("weights not in (0, 1] best first at %d: %v", i, c)
				}
				// Every narrower word has the word among its concepts.
				_, cs := lx.Lookup(c.Word)
				if i < 50 && !slices.Contains(conceptWords(cs), strings.TrimSuffix(tt.word, "s")) {
					t.Fatalf("%q is narrower than %q but lacks it: %v", c.Word, tt.word, conceptWords(cs))
				}
			}
		})
	}
	for _, w := range []string{"the", "have", "xyzzyq", "", "ab"} {
		if ns := lx.Narrower(w); ns.Len() != 0 {
			t.Errorf("Narrower(%q) = %v, want nothing", w, conceptWords(ns))
		}
	}
}

func TestAppendForms(t *testing.T) {
	lx := mustDefault(t)
	tests := []struct {
		base string
		want []string
	}{
		{"puppy", []string{"puppy", "puppies"}},
		{"watch", []string{"watches", "watched", "watching"}},
		{"bake", []string{"bakes", "baked", "baking"}},
		{"free", []string{"freed", "freeing"}},
		{"play", []string{"plays", "played", "playing"}},
		{"grow", []string{"grows", "grew", "grown", "growing"}}, // irregular, from WordNet's exceptions
		{"child", []string{"children"}},
		{"xyzzyq", []string{"xyzzyq", "xyzzyqs"}}, // not in the table: regular forms only
	}
	for _, tt := range tests {
		got := lx.AppendForms(nil, tt.base)
		if len(got) == 0 || got[0] != tt.base {
			t.Errorf("AppendForms(%q) = %q, want the base first", tt.base, got)
		}
		for _, w := range tt.want {
			if !slices.Contains(got, w) {
				t.Errorf("AppendForms(%q) = %q, lacks %q", tt.base, got, w)
			}
		}
	}
}

func TestParseNarrower(t *testing.T) {
	lx, err := Parse(gz(t, Header+"\n2\ninstrument\nstringed\n2\nviola 0:66 1:255\ncello 0:200\n1\nviolae viola\n"))
	if err != nil {
		t.Fatal(err)
	}
	ns := lx.Narrower("instrument")
	if got := conceptWords(ns); !slices.Equal(got, []string{"cello", "viola"}) || ns.At(1).Weight != float32(66)/255 {
		t.Fatalf("Narrower(instrument) = %v", got)
	}
	if got := lx.AppendForms([]string{"x"}, "viola"); got[0] != "x" || !slices.Contains(got, "violae") || !slices.Contains(got, "violas") {
		t.Fatalf("AppendForms(viola) = %q", got)
	}
}

func TestAppendNounForms(t *testing.T) {
	lx := mustDefault(t)
	tests := []struct {
		base      string
		want, not []string
	}{
		{"puppy", []string{"puppy", "puppies"}, []string{"puppied", "puppying"}},
		{"watch", []string{"watch", "watches"}, []string{"watched", "watching"}},
		{"grow", []string{"grows", "grew", "grown"}, []string{"growing"}}, // irregular forms kept
		{"th", []string{"th"}, []string{"thing", "things"}},               // never a function word
	}
	for _, tt := range tests {
		got := lx.AppendNounForms(nil, tt.base)
		for _, w := range tt.want {
			if !slices.Contains(got, w) {
				t.Errorf("AppendNounForms(%q) = %q, lacks %q", tt.base, got, w)
			}
		}
		for _, w := range tt.not {
			if slices.Contains(got, w) || (w == "thing" && slices.Contains(lx.AppendForms(nil, tt.base), w)) {
				t.Errorf("AppendNounForms(%q) = %q, holds %q", tt.base, got, w)
			}
		}
	}
}
