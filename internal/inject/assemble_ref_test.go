package inject

// The assembly as it was before its request-path costs were cut (counting
// each passage line once per request, rendering the block without
// encoding it until it fits, no memoCounter, reading tool-call ids only
// from messages that can carry them), kept as the reference TestAssembleMatchesReference
// compares assemble with. Only names changed (ref…).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/memgate/memgate/internal/memory"
)

func (a *Assembler) refAssemble(req memory.Request, system, rest []memory.Message, fullHistory bool, ld loaded) (memory.Prepared, error) {
	model := req.Model
	budget := a.Budget(req)
	// Every message is tokenized once: the accounting of the original
	// request, the untouchable parts and the fitting of recent turns all
	// count the same messages.
	memo := make(map[string]int, len(req.Messages)+len(ld.stored))
	cost := func(m memory.Message) int {
		raw := rawOf(m)
		if c, ok := memo[string(raw)]; ok {
			return c
		}
		c := a.deps.Counter.RawMessage(model, raw)
		memo[string(raw)] = c
		return c
	}
	sum := func(ms []memory.Message) int {
		n := 0
		for _, m := range ms {
			n += cost(m)
		}
		return n
	}

	// The conversation: stored history after the summary (new-only
	// clients), then the client's messages. From cur on it is the current
	// turn, which is never dropped.
	var unsummarised, history []memory.Message
	if !fullHistory {
		for _, m := range ld.stored {
			if memory.IsSystem(m.Role) || (ld.summary != nil && m.Seq <= ld.summary.ToSeq) {
				continue
			}
			unsummarised = append(unsummarised, m)
		}
		history = refUsableHistory(unsummarised, rest)
	}
	conv := make([]memory.Message, 0, len(history)+len(rest))
	conv = append(conv, history...)
	conv = append(conv, rest...)
	cur := currentStart(conv, len(history), rest)
	candidates, current := conv[:cur], conv[cur:]

	priming := a.deps.Counter.Messages(model, nil)
	// system and rest are the client's messages, Raw for Raw.
	original := priming + sum(system) + sum(rest)
	if !fullHistory {
		if ld.summary != nil {
			original += ld.summary.CoveredTokens
		}
		original += sum(unsummarised)
	}

	parts := map[string]int{"system": sum(system), "current": sum(current)}
	fixed := priming + parts["system"] + parts["current"]
	if fixed > budget {
		// Only the untouchable parts, and still too many: forward them.
		out := raws(system, current)
		return memory.Prepared{
			Messages: out, TokensOriginal: original, TokensSent: a.deps.Counter.Messages(model, out),
			OverBudget: true, Budget: budget, Parts: parts,
		}, nil
	}
	room := budget - fixed
	keep := recallFilter(req, conv, history, ld.summary != nil)

	// A new-only client always gets the summary (the history before it is
	// not loaded); a full-history client only when its own history overflows.
	withSummary := !fullHistory
	var (
		blk      json.RawMessage
		blkCost  int
		sections map[string]int
		kept     []memory.Message
		spent    int
	)
	for {
		sel := a.refSelectParts(model, budget, room, ld, withSummary, keep, 0)
		var err error
		blk, blkCost, sections, err = a.refBlock(model, sel, room)
		if err != nil {
			return memory.Prepared{}, err
		}
		kept, spent = fitNewest(candidates, cost, room-blkCost)
		if withSummary || len(kept) == len(candidates) || ld.summary == nil {
			break
		}
		withSummary = true
	}
	// Every recent turn fit and tokens are left: they go to more recalled
	// passages, within what the recent turns leave.
	if left := room - blkCost - spent; len(kept) == len(candidates) && left >= minPassageCost && len(ld.items) > 0 {
		sel := a.refSelectParts(model, budget, room, ld, withSummary, keep, left)
		b2, c2, s2, err := a.refBlock(model, sel, room-spent)
		if err != nil {
			return memory.Prepared{}, err
		}
		if c2 > blkCost {
			blk, blkCost, sections = b2, c2, s2
		}
	}

	out := make([]json.RawMessage, 0, len(system)+1+len(kept)+len(current))
	out = append(out, raws(system)...)
	if blk != nil {
		out = append(out, blk)
	}
	out = append(out, raws(kept, current)...)
	for k, v := range sections {
		parts[k] = v
	}
	parts["memory"] = blkCost
	parts["recent"] = spent
	return memory.Prepared{
		Messages:       out,
		TokensOriginal: original,
		TokensSent:     priming + parts["system"] + blkCost + spent + parts["current"],
		Budget:         budget,
		Parts:          parts,
	}, nil
}

func (a *Assembler) refSelectParts(model string, budget, room int, ld loaded, withSummary bool, keep func(memory.Item) bool, extra int) selection {
	var sel selection
	sh := a.opts.Shares
	factsShare := int(sh.Facts * float64(budget))
	factsCap := min(factsShare, room)
	used := 0
	for _, f := range ld.facts {
		if !f.Pinned {
			continue
		}
		c := a.refLineCost(model, f.Statement())
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
		text := a.refFitText(model, ld.summary.Text, min(summaryShare, room))
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
		c := a.refLineCost(model, f.Statement())
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
		c := a.refLineCost(model, passageLine(p))
		if used+c > recallCap {
			continue
		}
		used += c
		sel.data.Passages = append(sel.data.Passages, p)
		sel.passageCosts = append(sel.passageCosts, c)
	}
	return sel
}

func (a *Assembler) refLineCost(model, text string) int {
	return a.deps.Counter.Text(model, "- "+text+"\n")
}

func (a *Assembler) refFitText(model, text string, limit int) string {
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

func (a *Assembler) refRender(sel selection) (json.RawMessage, string, error) {
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
	raw, err := refSystemRaw(text)
	if err != nil {
		return nil, "", err
	}
	return raw, text, nil
}

func refSystemRaw(text string) (json.RawMessage, error) {
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

func (a *Assembler) refBlock(model string, sel selection, room int) (json.RawMessage, int, map[string]int, error) {
	for {
		raw, text, err := a.refRender(sel)
		if err != nil {
			return nil, 0, nil, err
		}
		c := 0
		if raw != nil {
			c = a.deps.Counter.SystemMessage(model, text)
		}
		if c <= room {
			return raw, c, a.refSectionCosts(model, sel), nil
		}
		if !sel.shrink() {
			return nil, 0, map[string]int{}, nil
		}
	}
}

func (a *Assembler) refSectionCosts(model string, sel selection) map[string]int {
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

func refUsableHistory(stored, next []memory.Message) []memory.Message {
	var out []memory.Message
	open := map[string]bool{} // call ids of the kept assistant message being answered
	for i := 0; i < len(stored); i++ {
		m := stored[i]
		switch {
		case memory.IsSystem(m.Role):
			continue
		case m.Role == "tool":
			_, id := refToolInfo(m)
			if !open[id] {
				continue // orphan
			}
			out = append(out, withRaw(m))
			continue
		}
		clear(open)
		var calls []string
		if m.Role == "assistant" { // only an assistant message's calls count
			calls, _ = refToolInfo(m)
		}
		if len(calls) > 0 {
			if !refAnswered(calls, stored[i+1:], next) {
				// Skip the call and its partial results.
				for i+1 < len(stored) && stored[i+1].Role == "tool" {
					i++
				}
				continue
			}
			for _, id := range calls {
				open[id] = true
			}
		}
		out = append(out, withRaw(m))
	}
	return out
}

func refAnswered(calls []string, after, next []memory.Message) bool {
	got := map[string]bool{}
	lead := func(msgs []memory.Message) bool { // reports whether msgs are all tool results
		for _, m := range msgs {
			if m.Role != "tool" {
				return false
			}
			_, id := refToolInfo(m)
			got[id] = true
		}
		return true
	}
	if lead(after) {
		lead(next)
	}
	for _, id := range calls {
		if !got[id] {
			return false
		}
	}
	return true
}

func refToolInfo(m memory.Message) (calls []string, answers string) {
	if len(m.Raw) == 0 {
		return nil, ""
	}
	var f toolFields
	if err := json.Unmarshal(m.Raw, &f); err != nil {
		return nil, ""
	}
	for _, c := range f.ToolCalls {
		calls = append(calls, c.ID)
	}
	return calls, f.ToolCallID
}

// memoCounter is a TokenCounter that counts each text once; it serves one
// request, from one goroutine.
type memoCounter struct {
	TokenCounter
	text map[[2]string]int // by model and text
}

// Text is the wrapped counter's Text, remembered by model and text.
func (m *memoCounter) Text(model, s string) int {
	if m.text == nil {
		m.text = make(map[[2]string]int)
	}
	key := [2]string{model, s}
	if n, ok := m.text[key]; ok {
		return n
	}
	n := m.TokenCounter.Text(model, s)
	m.text[key] = n
	return n
}
