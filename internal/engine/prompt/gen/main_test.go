package main

import (
	"go/format"
	"slices"
	"strings"
	"testing"
)

// sample is a few lines in confusables.txt's layout (byte order mark,
// header, blank lines, comments), chosen for the selection rule's cases.
const sample = "\uFEFF# confusables.txt\n" +
	"# Version: 14.0.0\n" +
	"#\n" +
	"0441 ;\t0063 ;\tMA\t# ( с → c ) CYRILLIC SMALL LETTER ES → LATIN SMALL LETTER C\t# \n" +
	"\n" +
	"0430 ;\t0061 ;\tMA\t# ( а → a ) CYRILLIC SMALL LETTER A → LATIN SMALL LETTER A\t# \n" +
	"0391 ;\t0041 ;\tMA\t# ( Α → A ) GREEK CAPITAL LETTER ALPHA → LATIN CAPITAL LETTER A\t# \n" +
	"0430 ;\t0061 ;\tMA\t# the same line again\n" +
	"FF21 ;\t0041 ;\tMA\t# ( Ａ → A ) FULLWIDTH LATIN CAPITAL LETTER A: NFKD reads it as A\n" +
	"1D41A ;\t0061 ;\tMA\t# ( 𝐚 → a ) MATHEMATICAL BOLD SMALL A: NFKD reads it as a\n" +
	"24B6 ;\t0061 ;\tMA\t# CIRCLED LATIN CAPITAL LETTER A under a: NFKD's A, the other case\n" +
	"FF29 ;\t006C ;\tMA\t# ( Ｉ → l ) FULLWIDTH LATIN CAPITAL LETTER I: NFKD's I is not l\n" +
	"0031 ;\t006C ;\tMA\t# ( 1 → l ) DIGIT ONE: ASCII source\n" +
	"00E6 ;\t0061 0065 ;\tMA\t# ( æ → ae ) two-letter prototype\n" +
	"2024 ;\t002E ;\tMA\t# ( ․ → . ) ONE DOT LEADER: prototype no letter\n" +
	"0413 ;\t0393 ;\tMA\t# ( Г → Γ ) prototype outside ASCII\n" +
	"1D6A8 ;\t0041 ;\tMA\t# ( 𝚨 → A ) MATHEMATICAL BOLD CAPITAL ALPHA: NFKD's Α is no A\n"

func TestParseSelectsOneCharacterLookalikesOfALetter(t *testing.T) {
	version, sets, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if version != "14.0.0" {
		t.Errorf("version = %q, want 14.0.0", version)
	}
	want := map[byte][]rune{
		'a': {0x0391, 0x0430, 0x1D6A8},
		'c': {0x0441},
		'l': {0xFF29},
	}
	for i, set := range sets {
		c := byte('a' + i)
		if !slices.Equal(set, want[c]) {
			t.Errorf("%q: %U, want %U", c, set, want[c])
		}
	}
}

func TestParseRejectsMalformedInput(t *testing.T) {
	for name, in := range map[string]string{
		"bad code point": "# Version: 14.0.0\nZZZZ ;\t0061 ;\tMA\t# x\n",
		"empty source":   "# Version: 14.0.0\n ;\t0061 ;\tMA\t# x\n",
		"two fields":     "# Version: 14.0.0\n0430 ;\t0061\t# x\n",
		"no version":     "0430 ;\t0061 ;\tMA\t# x\n",
	} {
		if _, _, err := parse(strings.NewReader(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestRenderIsGofmtSource: the table is written as gofmt writes it, each
// letter's characters escaped in code point order.
func TestRenderIsGofmtSource(t *testing.T) {
	_, sets, err := parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	src := render("14.0.0", sets)
	formatted, err := format.Source(src)
	if err != nil {
		t.Fatalf("render wrote no Go: %v\n%s", err, src)
	}
	if string(formatted) != string(src) {
		t.Errorf("render's output is not gofmt's:\n%s", src)
	}
	for _, line := range []string{
		"UTS #39, version 14.0.0",
		"\t// a\n\t\"\\u0391\\u0430\\U0001D6A8\",\n",
		"\t// b\n\t\"\",\n",
		"\t// l\n\t\"\\uFF29\",\n",
	} {
		if !strings.Contains(string(src), line) {
			t.Errorf("output lacks %q:\n%s", line, src)
		}
	}
}
