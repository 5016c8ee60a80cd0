package prompt

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// openingTag matches a block's opening tag, "<name>" or "<name
// attributes>", at its start, and captures the name.
var openingTag = regexp.MustCompile(`^<([A-Za-z][A-Za-z0-9_.:-]*)(?:\s[^<>]*)?>`)

// checkDelimiters fails unless every block tmpl renders is enclosed in
// one tag pair — it starts with an opening tag ("<memory>") and ends
// with the same name's closing tag ("</memory>") —, or is empty. Quoting
// (quoter) keeps stored text from writing a tag, and from writing a
// lookalike of one that spells a name tmpl writes; a block delimited
// otherwise ("MEMORY:" … "END OF MEMORY", "[memory]" … "[/memory]", a
// Markdown fence) could be closed by stored text that spells its closing
// line, so it is refused rather than sent. tmpl is rendered over sample
// data with every part set, with each part alone and with none, so a
// branch of it that delimits the block otherwise is found too (one that
// only more data takes is found as it renders: checkBlock). It returns
// the names of the tags tmpl's source and its sample blocks write
// (templateTags): those a lookalike bracket may not begin.
func checkDelimiters(src string, tmpl *template.Template) ([]string, error) {
	names := templateTags(src)
	for _, d := range delimiterSamples() {
		var b strings.Builder
		if err := tmpl.Execute(&b, d); err != nil {
			return nil, fmt.Errorf("prompt: memory template: render a sample block: %w: %w", err, memory.ErrInvalid)
		}
		text := strings.TrimSpace(b.String())
		if text == "" {
			continue
		}
		for _, n := range templateTags(text) {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
		if _, ok := enclosingTag(text); !ok {
			return nil, unenclosed(text)
		}
	}
	return names, nil
}

// checkBlock fails unless text, a block a custom template rendered (not
// empty), is enclosed in one tag pair (enclosingTag) of one of names,
// those checkDelimiters found and quoter quotes against: a branch of the
// template that the samples never took may delimit a block otherwise, or
// with a tag whose lookalikes stored text was free to write. The error
// holds none of text, which holds a user's stored text.
func checkBlock(text string, names []string) error {
	if n, ok := enclosingTag(text); !ok || !slices.Contains(names, strings.ToLower(n)) {
		return fmt.Errorf("prompt: memory template rendered a block that is not enclosed in one tag pair <name>…</name> "+
			"of a name its source or sample blocks write (%s), so stored text could close it: it must enclose each block so: %w",
			strings.Join(names, ", "), memory.ErrInvalid)
	}
	return nil
}

// enclosingTag returns the name of the tag pair text is enclosed in:
// text starts with an opening tag (openingTag) and ends with the closing
// tag of its name. (The closing tag cannot overlap the opening one: that
// holds no "<" after its first character.)
func enclosingTag(text string) (string, bool) {
	m := openingTag.FindStringSubmatch(text)
	if m == nil || !strings.HasSuffix(text, "</"+m[1]+">") {
		return "", false
	}
	return m[1], true
}

// unenclosed is the error of a block that no tag pair encloses.
func unenclosed(text string) error {
	return fmt.Errorf("prompt: memory template must enclose each block it renders in one tag pair, <name>…</name> "+
		"(as the default's <memory>…</memory>), so that stored text cannot close it; it renders %q: %w",
		memory.Truncate(text, 120), memory.ErrInvalid)
}

// delimiterSamples returns the data checkDelimiters renders: every part
// set, each part alone, and none.
func delimiterSamples() []BlockData {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	pinned := []memory.Fact{{Type: memory.FactGoal, Key: "goal", Value: "stored text", Pinned: true}}
	facts := []memory.Fact{{Type: memory.FactProfile, Key: "city", Value: "stored text"}}
	passages := []Passage{
		{Date: "2026-01-02", Conversation: "c", Here: true, Kind: "message", Text: "stored text", At: at},
		{Date: "2026-01-02", Conversation: "d", From: "conversation d", Kind: "message", Text: "stored text", At: at},
	}
	return []BlockData{
		{Pinned: pinned, Summary: "stored text", Facts: facts, Passages: passages},
		{Pinned: pinned}, {Summary: "stored text"}, {Facts: facts}, {Passages: passages},
		{},
	}
}
