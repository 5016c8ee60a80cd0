package inject

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"github.com/memgate/memgate/internal/memory"
)

// DefaultTemplate renders the memory block when Options.Template is empty.
// Templates are Go text/template over BlockData; an empty rendering (after
// trimming spaces) adds no block.
const DefaultTemplate = `{{if or .Pinned .Summary .Facts .Passages -}}
<memory>
What memgate remembers about this user and conversation. Use it when relevant; the user does not see it.
{{- if .Pinned}}

Pinned — the user's standing goals, limits, preferences and decisions:
{{- range .Pinned}}
- {{.Statement}}
{{- end}}
{{- end}}
{{- if .Summary}}

Summary of the earlier conversation:
{{.Summary}}
{{- end}}
{{- if .Facts}}

Facts about the user:
{{- range .Facts}}
- {{.Statement}}
{{- end}}
{{- end}}
{{- if .Passages}}

Recalled from earlier messages:
{{- range .Passages}}
- [{{.Date}}, conversation {{.Conversation}}] {{.Text}}
{{- end}}
{{- end}}
</memory>
{{- end}}`

// renderDefault writes what DefaultTemplate renders for d, without the
// template engine's reflection (the block is rendered on every request,
// and again as it shrinks). TestRenderDefaultMatchesTemplate keeps the two
// the same: a change to DefaultTemplate must be made here too.
func renderDefault(b *strings.Builder, d BlockData) {
	if len(d.Pinned) == 0 && d.Summary == "" && len(d.Facts) == 0 && len(d.Passages) == 0 {
		return
	}
	n := 320 + len(d.Summary) // the headings (about 290 bytes), and at most this per line:
	for _, f := range d.Pinned {
		n += 4 + len(f.Key) + 2 + len(f.Value)
	}
	for _, f := range d.Facts {
		n += 4 + len(f.Key) + 2 + len(f.Value)
	}
	for _, p := range d.Passages {
		n += 24 + len(p.Date) + len(p.Conversation) + len(p.Text)
	}
	b.Grow(n)
	b.WriteString("<memory>\nWhat memgate remembers about this user and conversation. Use it when relevant; the user does not see it.")
	if len(d.Pinned) > 0 {
		b.WriteString("\n\nPinned — the user's standing goals, limits, preferences and decisions:")
		for _, f := range d.Pinned {
			b.WriteString("\n- ")
			b.WriteString(f.Statement())
		}
	}
	if d.Summary != "" {
		b.WriteString("\n\nSummary of the earlier conversation:\n")
		b.WriteString(d.Summary)
	}
	if len(d.Facts) > 0 {
		b.WriteString("\n\nFacts about the user:")
		for _, f := range d.Facts {
			b.WriteString("\n- ")
			b.WriteString(f.Statement())
		}
	}
	if len(d.Passages) > 0 {
		b.WriteString("\n\nRecalled from earlier messages:")
		for _, p := range d.Passages {
			b.WriteString("\n- [")
			b.WriteString(p.Date)
			b.WriteString(", conversation ")
			b.WriteString(p.Conversation)
			b.WriteString("] ")
			b.WriteString(p.Text)
		}
	}
	b.WriteString("\n</memory>")
}

// BlockData is what the memory template renders.
type BlockData struct {
	// Pinned are facts that are always injected: goals, limits, preferences
	// and decisions the user stated.
	Pinned []memory.Fact
	// Summary is the conversation's rolling summary ("" when none is shown).
	Summary string
	// Facts are other current facts about the user, most relevant first.
	Facts []memory.Fact
	// Passages are recalled earlier messages, most relevant first.
	Passages []Passage
}

// Passage is one recalled passage as the template sees it.
type Passage struct {
	// Date is when it was said, as 2006-01-02.
	Date string
	// Conversation is where it was said.
	Conversation string
	// Kind is "message", "summary" or "fact".
	Kind string
	// Text is the passage.
	Text string
}

// section names, also the keys of Prepared.Parts.
const (
	partPinned  = "pinned"
	partSummary = "summary"
	partFacts   = "facts"
	partRecall  = "recall"
)

// selection is the content chosen for a memory block.
type selection struct {
	data BlockData
	// Line costs (lineCost) of data's pinned facts, facts and passages,
	// one for each, as selectParts counted them; shrink drops the last
	// ones with the lines.
	pinnedCosts, factCosts, passageCosts []int
}

// selectParts chooses the block's content in priority order — pinned facts,
// the summary, other facts, recalled passages — each within its share of
// budget and all within room. What the summary and the facts leave of
// their shares flows to the recalled passages, and extra more tokens are
// theirs too (what the recent turns left unused). Passages are packed best
// first: each that fits in what is left is taken, one too large is
// skipped for the smaller ones after it.
func (a *Assembler) selectParts(model string, budget, room int, ld loaded, withSummary bool, keep func(memory.Item) bool, extra int) selection {
	var sel selection
	sh := a.opts.Shares
	factsShare := int(sh.Facts * float64(budget))
	factsCap := min(factsShare, room)
	used := 0
	for _, f := range ld.facts {
		if !f.Pinned {
			continue
		}
		c := a.lineCost(model, f.Statement())
		if used+c > factsCap {
			continue
		}
		used += c
		sel.data.Pinned = append(sel.data.Pinned, f)
		sel.pinnedCosts = append(sel.pinnedCosts, c)
	}
	room -= used
	pinned := used
	summaryShare := int(sh.Summary * float64(budget))
	summaryUsed := 0
	if withSummary && ld.summary != nil {
		text := a.fitText(model, ld.summary.Text, min(summaryShare, room))
		summaryUsed = a.deps.Counter.Text(model, text)
		sel.data.Summary = text
		room -= summaryUsed
	}
	factsCap = min(factsCap-used, room)
	used = 0
	n := 0
	for _, f := range ld.facts {
		if f.Pinned || n >= a.opts.FactsMax || restates(sel.data.Pinned, f) {
			continue
		}
		c := a.lineCost(model, f.Statement())
		if used+c > factsCap {
			continue
		}
		used += c
		n++
		sel.data.Facts = append(sel.data.Facts, f)
		sel.factCosts = append(sel.factCosts, c)
	}
	room -= used
	// The shares the summary and facts left unused are the passages' too.
	spare := max(summaryShare-summaryUsed, 0) + max(factsShare-pinned-used, 0)
	recallCap := min(int(sh.Recall*float64(budget))+spare+extra, room)
	used = 0
	for _, it := range ld.items {
		if recallCap-used < minPassageCost {
			break
		}
		if !keep(it) {
			continue
		}
		p := Passage{Date: passageDate(it), Conversation: it.Conversation, Kind: it.Kind, Text: it.Text}
		c := a.lineCost(model, passageLine(p))
		if used+c > recallCap {
			continue
		}
		used += c
		sel.data.Passages = append(sel.data.Passages, p)
		sel.passageCosts = append(sel.passageCosts, c)
	}
	return sel
}

// minPassageCost is the fewest tokens a passage line costs (its bullet,
// date and conversation): with less left, packing stops.
const minPassageCost = 12

// passageDate is when a recalled item was said, as 2006-01-02.
func passageDate(it memory.Item) string {
	at := it.SaidAt
	if at.IsZero() {
		at = it.CreatedAt
	}
	return at.UTC().Format("2006-01-02")
}

// passageLine is how a passage reads in the block, after its "- ".
func passageLine(p Passage) string {
	return "[" + p.Date + ", conversation " + p.Conversation + "] " + p.Text
}

// shrink drops the least important remaining item of the selection —
// a passage, then an unpinned fact, then the summary, then a pinned fact,
// newest-ranked last — and reports whether anything was left to drop.
func (sel *selection) shrink() bool {
	d := &sel.data
	switch {
	case len(d.Passages) > 0:
		d.Passages = d.Passages[:len(d.Passages)-1]
		sel.passageCosts = sel.passageCosts[:len(d.Passages)]
	case len(d.Facts) > 0:
		d.Facts = d.Facts[:len(d.Facts)-1]
		sel.factCosts = sel.factCosts[:len(d.Facts)]
	case d.Summary != "":
		d.Summary = ""
	case len(d.Pinned) > 0:
		d.Pinned = d.Pinned[:len(d.Pinned)-1]
		sel.pinnedCosts = sel.pinnedCosts[:len(d.Pinned)]
	default:
		return false
	}
	return true
}

// lineCost is what one "- text" line of a section costs.
func (a *Assembler) lineCost(model, text string) int {
	return a.deps.Counter.Text(model, "- "+text+"\n")
}

// fitText returns text, or as many of its leading lines (the last one cut
// at a word) as fit in limit tokens.
func (a *Assembler) fitText(model, text string, limit int) string {
	if limit <= 0 {
		return ""
	}
	if a.deps.Counter.Text(model, text) <= limit {
		return text
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		if a.deps.Counter.Text(model, b.String()+line) <= limit {
			b.WriteString(line)
			continue
		}
		for _, w := range strings.SplitAfter(line, " ") {
			if a.deps.Counter.Text(model, b.String()+w) > limit {
				break
			}
			b.WriteString(w)
		}
		break
	}
	return strings.TrimSpace(b.String())
}

// render executes the template over sel and returns the memory block as a
// system message, or nil when the rendering is empty.
func (a *Assembler) render(sel selection) (json.RawMessage, string, error) {
	var b strings.Builder
	if a.defaultTmpl {
		renderDefault(&b, sel.data)
	} else if err := a.tmpl.Execute(&b, sel.data); err != nil {
		return nil, "", fmt.Errorf("render memory block: %w", err)
	}
	text := strings.TrimSpace(b.String())
	if text == "" {
		return nil, "", nil
	}
	raw, err := systemRaw(text)
	if err != nil {
		return nil, "", err
	}
	return raw, text, nil
}

// systemRaw is the system message whose content is text, as the memory
// block is sent.
func systemRaw(text string) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep the <memory> delimiters readable upstream
	if err := enc.Encode(struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}{"system", text}); err != nil {
		return nil, fmt.Errorf("encode memory block: %w", err)
	}
	return bytes.TrimSpace(buf.Bytes()), nil
}

// block renders sel, shrinking it until the block costs at most room, and
// returns the block (nil for none), its cost and the section costs of what
// was kept.
func (a *Assembler) block(model string, sel selection, room int) (json.RawMessage, int, map[string]int, error) {
	for {
		raw, text, err := a.render(sel)
		if err != nil {
			return nil, 0, nil, err
		}
		c := 0
		if raw != nil {
			c = a.deps.Counter.SystemMessage(model, text)
		}
		if c <= room {
			return raw, c, a.sectionCosts(model, sel), nil
		}
		if !sel.shrink() {
			return nil, 0, map[string]int{}, nil
		}
	}
}

// sectionCosts adds up each section's line costs after shrinking, as
// selectParts counted them (the summary is counted again: shrink may have
// dropped it).
func (a *Assembler) sectionCosts(model string, sel selection) map[string]int {
	out := map[string]int{}
	sum := func(part string, costs []int) {
		for _, c := range costs {
			out[part] += c
		}
	}
	sum(partPinned, sel.pinnedCosts)
	if sel.data.Summary != "" {
		out[partSummary] = a.deps.Counter.Text(model, sel.data.Summary)
	}
	sum(partFacts, sel.factCosts)
	sum(partRecall, sel.passageCosts)
	return out
}

// restates reports whether f says what one of the pinned facts already says
// (the same statement stored under another key, e.g. by pattern detection
// and by model extraction), compared on letters and digits only.
func restates(pinned []memory.Fact, f memory.Fact) bool {
	v := foldText(f.Value)
	if v == "" {
		return false
	}
	for _, p := range pinned {
		pv := foldText(p.Value)
		if pv != "" && (strings.Contains(pv, v) || strings.Contains(v, pv)) {
			return true
		}
	}
	return false
}

// foldText lower-cases s and keeps only letters and digits, one space apart.
func foldText(s string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}), " ")
}
