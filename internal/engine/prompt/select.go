package prompt

import (
	"slices"
	"strings"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// selection is the content chosen for a memory block.
type selection struct {
	data BlockData
	// Line costs (lineCost) of data's pinned facts, facts and passages,
	// one for each, as selectParts counted them; shrink drops the last
	// ones with the lines.
	pinnedCosts, factCosts, passageCosts []int
	// summaryCost is what data.Summary costs (Counter.Text).
	summaryCost int
	// lateFacts is how many of data.Facts, at its end, go with the
	// recalled block, not the stable one (Options.StableFacts).
	lateFacts int
}

// fixedParts is a selection of pinned facts, the summary and facts, and
// what it leaves the recalled passages.
type fixedParts struct {
	sel selection
	// room is what is left of the block's room; recallShare is the
	// passages' own share of the budget, and spare what the summary and
	// facts left of theirs.
	room, recallShare, spare int
	// fromSummary is the part of the summary's share that an extractive
	// summary may not take (Shares.ExtractiveSummary): it goes to the
	// passages, as measured (BENCHMARKS.md, issue 27).
	fromSummary int
}

// partCosts counts the memory block's lines once per request: assemble
// chooses the block's content up to three times (again with the summary
// when the recent turns overflow, and with more room for passages when
// they leave tokens unused), from the same facts and recalled items.
type partCosts struct {
	a     *Assembler
	model string
	// keep returns what a recalled item shows, and whether it is shown
	// (recallFilter).
	keep func(memory.Item) (memory.Item, bool)
	// shown, when set, reports a passage a kept block of the prompt
	// shows already (Options.KeepRecall): packing charges its cost, as
	// if shown, and does not show it again, so this turn's block adds
	// only what it would have shown and the prompt does not show.
	shown func(memory.Item) bool
	// conv is the request's conversation: its passages' lines do not name
	// it (Passage.Here).
	conv string
	// factCosts are the line costs of the request's facts, by index;
	// counted reports which are set.
	factCosts []int
	counted   []bool
	// items are the recalled items (as keep shows them, once passage has
	// seen them: ownItems then); passages and passageCosts are each
	// as the block shows it and its line cost, by index, set on first use
	// (state).
	items        []memory.Item
	ownItems     bool // items is pc's own copy
	passages     []Passage
	passageCosts []int
	state        []itemState
	// stable and late, with Options.StableFacts, are the indexes of the
	// facts the stable block may show, in the order they are chosen
	// (stableFactOrder), and of the others, in recall's order; nil
	// without it.
	stable, late []int
	// headingCosts are, by index, what the heading of each item's group
	// ("[date]" or "[date, conversation c]") costs as a line, set with passageCosts: pack charges
	// it to the first passage of a group it takes.
	headingCosts []int
	// lines holds every passage's heading and line built ("[date,
	// conversation c]\n- text\n", or "[date]\n- text\n" for conv's), back
	// to back: each part counted and each passage's Date a substring of
	// it, so a request's lines cost one allocation.
	lines strings.Builder
}

// itemState is what partCosts knows of a recalled item.
type itemState uint8

const (
	itemUnseen   itemState = iota
	itemShowable           // passes keep; passage and cost set
	itemFiltered           // fails keep
	itemShown              // passes keep, shown already (shown); cost set
)

// newPartCosts returns the line costs of ld's facts and items for model
// in a request of conversation conv, none counted yet; keep returns what a
// recalled item shows and whether it is shown (recallFilter).
func (a *Assembler) newPartCosts(model, conv string, ld loaded, keep func(memory.Item) (memory.Item, bool)) *partCosts {
	return &partCosts{
		a: a, model: model, keep: keep, conv: conv,
		factCosts: make([]int, len(ld.facts)), counted: make([]bool, len(ld.facts)),
		items: ld.items, passages: make([]Passage, len(ld.items)), passageCosts: make([]int, len(ld.items)),
		headingCosts: make([]int, len(ld.items)), state: make([]itemState, len(ld.items)),
	}
}

// fact returns the line cost of the i-th fact, f.
func (pc *partCosts) fact(i int, f memory.Fact) int {
	if !pc.counted[i] {
		pc.factCosts[i] = pc.a.lineCost(pc.model, f.Statement())
		pc.counted[i] = true
	}
	return pc.factCosts[i]
}

// passage reports whether the i-th recalled item is to be shown and, if
// so, returns it as a passage, its line cost (lineCost of its text) and
// what its group's heading costs as a line (headingCost): what keep and
// the counter answer, computed once. An item a kept block shows already
// (shown) is not to be shown; its line cost is returned still.
func (pc *partCosts) passage(i int) (p Passage, cost, heading int, ok bool) {
	switch pc.state[i] {
	case itemShowable:
		return pc.passages[i], pc.passageCosts[i], pc.headingCosts[i], true
	case itemFiltered:
		return Passage{}, 0, 0, false
	case itemShown:
		return Passage{}, pc.passageCosts[i], 0, false
	}
	it, ok := pc.keep(pc.items[i])
	if !ok {
		pc.state[i] = itemFiltered
		return Passage{}, 0, 0, false
	}
	if it.Text != pc.items[i].Text {
		if !pc.ownItems { // ld's items are shared: copy before the first change
			pc.items, pc.ownItems = slices.Clone(pc.items), true
		}
		pc.items[i] = it
	}
	if pc.lines.Cap() == 0 {
		n := 0
		for _, it := range pc.items[i:] {
			n += len("[2006-01-02, conversation ]\n- \n") + maxConversationName + len(it.Text)
		}
		pc.lines.Grow(n)
	}
	b := &pc.lines
	conv := pc.a.q.lines(it.Conversation)
	start := b.Len()
	here := it.Conversation == pc.conv
	from := ""
	if !here {
		from = pc.a.q.conversationLabel(it.Conversation)
	}
	at := passageTime(it)
	b.WriteString("[")
	var date [16]byte
	b.Write(at.AppendFormat(date[:0], "2006-01-02"))
	dateEnd := b.Len()
	if !here {
		b.WriteString(", ")
		b.WriteString(from)
	}
	b.WriteString("]\n")
	lineStart := b.Len()
	b.WriteString("- ")
	text := pc.a.q.passage(it) // stored text is data: it cannot end the block, or forge its layout
	b.WriteString(text)
	b.WriteByte('\n')
	s := b.String()
	p = Passage{Date: s[start+len("[") : dateEnd], Conversation: conv, Here: here, From: from, Kind: it.Kind, Text: text, At: at}
	cost = pc.a.deps.Counter.Text(pc.model, s[lineStart:]) // lineCost(model, p.Text)
	if pc.shown != nil && pc.shown(it) {
		pc.passageCosts[i], pc.state[i] = cost, itemShown
		return Passage{}, cost, 0, false
	}
	heading = pc.a.deps.Counter.Text(pc.model, s[start:lineStart]) // headingCost(model, p)
	pc.passages[i], pc.passageCosts[i], pc.headingCosts[i], pc.state[i] = p, cost, heading, itemShowable
	return p, cost, heading, true
}

// selectParts chooses the block's content in priority order — pinned facts,
// the summary, other facts, recalled passages — each within its share of
// budget and all within room (selectFixed, then pack).
func (a *Assembler) selectParts(pc *partCosts, budget, room int, ld loaded, withSummary bool, extra int) selection {
	sel, _ := pc.pack(a.selectFixed(pc, budget, room, ld, withSummary), extra)
	return sel
}

// selectFixed chooses the pinned facts, the summary (withSummary) and
// other facts of a block, each within its share of budget and all within
// room.
func (a *Assembler) selectFixed(pc *partCosts, budget, room int, ld loaded, withSummary bool) fixedParts {
	var sel selection
	model := pc.model
	sh := a.opts.Shares
	// Pinned facts, within their own share: ld.facts lists them most
	// relevant to the current turn first, then most recent (see
	// orderFacts), so those win when not all fit.
	pinnedShare := int(sh.Pinned * float64(budget))
	pinnedCap := min(pinnedShare, room)
	pinned := 0
	var shown []bool      // by index in ld.facts: chosen as a pin
	pinOrder := pc.stable // the pins: in the stable order, with StableFacts
	if pinOrder == nil {
		pinOrder = allIndexes(len(ld.facts))
	}
	var pinLines map[string]bool // the pins chosen, as foldText of their line
	for _, i := range pinOrder {
		f := ld.facts[i]
		if !f.Pinned {
			continue
		}
		// The same sentence pinned twice (two rules, or said twice
		// under another topic) is shown once.
		line := foldText(f.Statement())
		if pinLines[line] {
			continue
		}
		c := pc.fact(i, f)
		if pinned+c > pinnedCap {
			continue
		}
		if shown == nil {
			shown = make([]bool, len(ld.facts))
		}
		shown[i] = true
		if pinLines == nil {
			pinLines = map[string]bool{}
		}
		pinLines[line] = true
		pinned += c
		sel.data.Pinned = append(sel.data.Pinned, f)
		sel.pinnedCosts = append(sel.pinnedCosts, c)
	}
	room -= pinned
	summaryShare := int(sh.Summary * float64(budget))
	summaryUsed, fromSummary := 0, 0
	if withSummary && ld.summary != nil {
		limit := summaryShare
		if ld.summary.Summariser == memory.SummariserExtractive {
			limit = min(limit, int(sh.ExtractiveSummary*float64(budget)))
			fromSummary = summaryShare - limit
		}
		text, c := a.fitText(model, ld.summary.Text, min(limit, room))
		summaryUsed = c
		sel.data.Summary, sel.summaryCost = text, c
		room -= summaryUsed
	}
	// Other facts, in recall's order. A pin left out of the pinned share
	// competes here like any fact: it is still stored, and shown when
	// recall ranks it high enough for this turn.
	factsShare := int(sh.Facts * float64(budget))
	factsCap := min(factsShare, room)
	used := 0
	n := 0
	orders := [][]int{allIndexes(len(ld.facts))}
	if pc.stable != nil || pc.late != nil {
		// The stable block's facts first, then the facts learnt since,
		// which go with the recalled block.
		orders = [][]int{pc.stable, pc.late}
	}
	for k, order := range orders {
		before := len(sel.data.Facts)
		for _, i := range order {
			f := ld.facts[i]
			if (shown != nil && shown[i]) || n >= a.opts.FactsMax || restates(sel.data.Pinned, f) {
				continue
			}
			c := pc.fact(i, f)
			if used+c > factsCap {
				continue
			}
			used += c
			n++
			sel.data.Facts = append(sel.data.Facts, f)
			sel.factCosts = append(sel.factCosts, c)
		}
		if k == 1 {
			sel.lateFacts = len(sel.data.Facts) - before
		}
	}
	room -= used
	// The shares the pins, summary and facts left unused are the passages' too.
	spare := max(pinnedShare-pinned, 0) + max(summaryShare-summaryUsed, 0) + max(factsShare-used, 0)
	return fixedParts{sel: sel, room: room, recallShare: int(sh.Recall * float64(budget)), spare: spare, fromSummary: fromSummary}
}

// pack adds recalled passages to fx's selection within the passages'
// share, what an extractive summary may not take of the summary's
// (fx.fromSummary) and extra more tokens
// (what the recent turns left unused), and within fx's room. Passages are
// packed best first: each that fits in what is left is taken, one too
// large is skipped for the smaller ones after it. The first passage taken
// of a day and conversation is charged its group's heading too: the
// passages after it in its group share it (PassageGroup), and shrink,
// which drops the last passage first, drops the heading with the group's
// last one. fx is not changed.
// pack also reports whether it took every passage to be shown: then no
// larger extra takes more.
func (pc *partCosts) pack(fx fixedParts, extra int) (selection, bool) {
	sel := fx.sel
	recallCap := min(fx.recallShare+fx.fromSummary+extra, fx.room)
	used := 0
	all := true
	var headed map[passageGroupKey]bool // the groups taken, whose heading is charged
	for i := range pc.items {
		if recallCap-used < minPassageCost {
			all = false
			break
		}
		p, c, h, ok := pc.passage(i)
		if !ok && c == 0 {
			continue
		}
		key := passageGroupKey{date: p.Date, conversation: p.Conversation}
		if !ok || headed[key] {
			h = 0
		}
		if used+c+h > recallCap {
			all = false
			continue
		}
		used += c + h
		if !ok { // shown already: charged, not shown again
			continue
		}
		if sel.data.Passages == nil { // room for all that are left
			sel.data.Passages = make([]Passage, 0, len(pc.items)-i)
			sel.passageCosts = make([]int, 0, len(pc.items)-i)
			headed = map[passageGroupKey]bool{}
		}
		headed[key] = true
		sel.data.Passages = append(sel.data.Passages, p)
		sel.passageCosts = append(sel.passageCosts, c+h)
	}
	return sel, all
}

// passageGroupKey is a PassageGroup's day and conversation.
type passageGroupKey struct{ date, conversation string }

// minPassageCost is the fewest tokens a passage costs (its bullet and a
// short turn with its role): with less left, packing stops.
const minPassageCost = 6

// passageDate is when a recalled item was said, as 2006-01-02.
func passageDate(it memory.Item) string {
	return passageTime(it).Format("2006-01-02")
}

// passageTime is when a recalled item was said, in UTC.
func passageTime(it memory.Item) time.Time {
	at := it.SaidAt
	if at.IsZero() {
		at = it.CreatedAt
	}
	return at.UTC()
}

// lineCost is what one "- text" line of a section costs.
func (a *Assembler) lineCost(model, text string) int {
	return a.deps.Counter.Text(model, "- "+text+"\n")
}

// fitText returns text, or as many of its leading lines (the last one cut
// at a word) as fit in limit tokens, and what the returned text costs.
func (a *Assembler) fitText(model, text string, limit int) (string, int) {
	if limit <= 0 {
		return "", a.deps.Counter.Text(model, "")
	}
	if c := a.deps.Counter.Text(model, text); c <= limit {
		return text, c
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
	fit := strings.TrimSpace(b.String())
	return fit, a.deps.Counter.Text(model, fit)
}

// allIndexes returns 0, 1, …, n-1.
func allIndexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// stableFactOrder splits the indexes of facts (recall's order) for
// Options.StableFacts: late are the facts learnt from what the prompt
// shows verbatim — stated in this conversation, in one of the unsummarised
// stored messages (whose keys are recentKeys; for a fact that names no
// message, updated at or after since, when the oldest of them was said)
// or, for a client that sends its own history (fullHistory), anywhere in
// it — in recall's order; stable
// are the others, pinned ones included, newest first (then by key and
// value), an order that does not depend on the current turn. The stable
// block then changes when compaction summarises the turns a fact came
// from, not with every turn.
func stableFactOrder(facts []memory.Fact, conversation string, recentKeys map[string]bool, since time.Time, fullHistory bool) (stable, late []int) {
	stable, late = []int{}, []int{}
	for i, f := range facts {
		fromRecent := recentKeys[f.Source] || (f.Source == "" && !since.IsZero() && !f.UpdatedAt.Before(since))
		if !f.Pinned && f.Conversation == conversation && (fullHistory || fromRecent) {
			late = append(late, i)
			continue
		}
		stable = append(stable, i)
	}
	slices.SortStableFunc(stable, func(x, y int) int {
		fx, fy := facts[x], facts[y]
		if c := fy.UpdatedAt.Compare(fx.UpdatedAt); c != 0 {
			return c
		}
		if c := strings.Compare(fx.Key, fy.Key); c != 0 {
			return c
		}
		return strings.Compare(fx.Value, fy.Value)
	})
	return stable, late
}

// withCurrent returns ranked (recall's facts, best first) followed by the
// facts of current it does not hold (by key and value).
func withCurrent(ranked, current []memory.Fact) []memory.Fact {
	if len(current) == 0 {
		return ranked
	}
	have := make(map[[2]string]bool, len(ranked))
	for _, f := range ranked {
		have[[2]string{f.Key, f.Value}] = true
	}
	out := slices.Clip(ranked)
	for _, f := range current {
		if !have[[2]string{f.Key, f.Value}] {
			out = append(out, f)
		}
	}
	return out
}
