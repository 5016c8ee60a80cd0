package prompt

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// assembleHeld is assemble, showing a new-only client's conversation the
// summary its previous stored turn was shown (Options.HoldSummary) when
// one is held, older than ld's, and every turn after it is loaded and
// fits both the recent turns' window and their share of the budget (what
// the memory block's shares leave), on a turn recall does not fill
// (Options.FillRecall, FillWhen); otherwise ld's. A stored turn's prompt
// then holds the summary it showed for the next request.
func (a *Assembler) assembleHeld(ctx context.Context, req memory.Request, system, rest []memory.Message, fullHistory bool, ld loaded) (memory.Prepared, error) {
	asm := a.within(ctx, req.Tenant, req.User)
	if fullHistory {
		return asm.assemble(req, system, rest, fullHistory, ld)
	}
	shown := ld.summary
	var (
		p   memory.Prepared
		err error
	)
	// A turn whose free room recall fills shows the newest summary, the
	// shortest account of the past, and leaves recall the most room.
	fills := a.opts.FillRecall && (a.opts.FillWhen != FillAsked || currentAsks(rest))
	if h := a.held.usable(req.Identity, ld.rev, ld.summary, ld.stored); h != nil && !fills {
		hl := ld
		hl.summary = h
		var all bool
		p, all, err = asm.assembleWindow(req, system, rest, fullHistory, hl)
		// The turns after the held summary are all shown and within the
		// recent turns' share of the budget (what compaction keeps them
		// to, and what the memory block's shares leave).
		recentShare := int((1 - min(a.opts.Shares.total(), 1)) * float64(p.Budget))
		if err == nil && all && p.Parts["recent"] <= recentShare {
			shown = h
		}
	}
	if shown == ld.summary {
		p, _, err = asm.assembleWindow(req, system, rest, fullHistory, ld)
	}
	if err == nil && req.Mode.Stores() && (shown != nil || !slices.Contains(ld.degraded, partSummary)) {
		a.held.put(req.Identity, ld.rev, ld.heldEpoch, shown)
	}
	return p, err
}

// assemble builds the upstream message list from the client's system
// messages and other messages (rest) and the loaded memory, within
// a.Budget(req). See Prepare for the contract.
func (a *Assembler) assemble(req memory.Request, system, rest []memory.Message, fullHistory bool, ld loaded) (memory.Prepared, error) {
	p, _, err := a.assembleWindow(req, system, rest, fullHistory, ld)
	return p, err
}

// assembleWindow is assemble; it also reports whether the prompt shows
// every turn the recent turns' window was offered (none dropped).
func (a *Assembler) assembleWindow(req memory.Request, system, rest []memory.Message, fullHistory bool, ld loaded) (memory.Prepared, bool, error) {
	model := req.Model
	ld = a.q.loaded(ld)
	budget := a.Budget(req)
	// Every message is tokenized once: the accounting of the original
	// request, the untouchable parts and the fitting of recent turns all
	// count the same messages, the same Raw (by its bytes' address and
	// length, which the memo keeps alive: no other bytes can take them).
	type rawKey struct {
		p *byte
		n int
	}
	count := func(m memory.Message) int {
		// A message with Raw is counted from what ParseMessage read of
		// it, not decoded again.
		if len(m.Raw) > 0 {
			return a.deps.Counter.Message(model, m)
		}
		return a.deps.Counter.RawMessage(model, rawOf(m))
	}
	memo := make(map[rawKey]int, len(ld.stored)+len(system)+min(len(rest), anchorStride))
	cost := func(m memory.Message) int {
		raw := rawOf(m) // never empty
		k := rawKey{&raw[0], len(raw)}
		if c, ok := memo[k]; ok {
			return c
		}
		c := count(m)
		memo[k] = c
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
		unsummarised = unsummarisedOf(ld)
		history = replayable(unsummarised, rest, req.NoTools)
	}
	if !fullHistory {
		history = history[a.windowAnchor(ld, history):]
	}
	conv := rest // a full-history client's: its own messages
	if len(history) > 0 {
		conv = make([]memory.Message, 0, len(history)+len(rest))
		conv = append(conv, history...)
		conv = append(conv, rest...)
	}
	cur := currentStart(conv, len(history), rest)
	candidates, current := conv[:cur], conv[cur:]
	// Of a full-history client's turns, only those from its anchor on may
	// be sent (historyAnchor): the older ones are only counted, once, for
	// TokensOriginal, and never memoized, grouped or compared.
	from := 0
	if fullHistory {
		from = historyAnchor(candidates, cost, budget)
	}
	offered := candidates[from:]

	priming := a.deps.Counter.Messages(model, nil)
	// system and rest are the client's messages, Raw for Raw.
	original := priming + sum(system) + sum(rest[from:])
	for _, m := range rest[:from] {
		original += count(m)
	}
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
		}, false, nil
	}
	room := budget - fixed
	// The turns before the anchor are never in the prompt: a passage
	// repeating one of them is not filtered as shown. Nor are those the
	// recent turns' window drops: the filter first takes every offered
	// turn as shown (dropped 0), then, once the window is known, only
	// those it kept (below), so a turn the window cannot hold — older in
	// a long chat, or behind a message larger than the window — is
	// recalled instead of left out of both.
	inPrompt := newPromptTurns(req.Conversation, conv[from:], ld.resent, ld.summary != nil)
	dropped := 0
	keep := inPrompt.recallFilter(dropped)
	// A turn that asks nothing keeps recall to its statement share and is
	// not filled (FillAsked): its prompt's volatile end stays small.
	asked := a.opts.FillWhen != FillAsked || currentAsks(current)
	recallShare := int(a.opts.Shares.Recall * float64(budget))
	statementShare := recallShare
	if !asked {
		// Shares.StatementRecall 0: no passages.
		statementShare = min(recallShare, int(a.opts.Shares.StatementRecall*float64(budget)))
	}
	var stableFacts, lateFacts []int
	if a.opts.StableFacts {
		recentKeys := make(map[string]bool, len(unsummarised))
		for _, m := range unsummarised {
			if m.Key != "" {
				recentKeys[m.Key] = true
			}
		}
		// The stable block chooses from all the user's current facts, not
		// only those recall ranked for this turn.
		ld.facts = withCurrent(ld.facts, ld.current)
		since := time.Time{} // when the oldest turn shown verbatim was said
		if len(unsummarised) > 0 {
			since = unsummarised[0].CreatedAt
		}
		stableFacts, lateFacts = stableFactOrder(ld.facts, req.Conversation, recentKeys, since, fullHistory)
		if a.opts.FillWhen == FillAsked && !asked {
			// A turn that asks nothing does without the facts of the
			// turns shown verbatim: its prompt's volatile end stays small.
			lateFacts = []int{}
		}
	}

	// With KeepRecall (KeepRecallResent for a full-history client), a
	// past user turn is rendered with the recalled block it was sent with,
	// right before it (as that request sent it), so the previous request's
	// prompt is this one's prefix; the turns and their blocks share the
	// recent turns' window, blocks leaving first (recentWindow). The
	// passages those blocks show count against this question's recall as
	// if shown again, and are not (partCosts.shown).
	var (
		keptBy     map[turnKey]string
		blockCosts map[string]int // made once a kept block is found
	)
	// A request whose history edits what the summary covers, or any
	// message, shows none: a kept block may show the old text (recalled
	// where the window no longer showed it), which its save retracts, and
	// a rendered block cannot be filtered as its passages were
	// (withoutUnsaid). Its prompt differs from the previous one from the
	// edit on anyway.
	if a.keepsRecall(req, fullHistory) && !ld.summaryEdited && len(ld.unsaid) == 0 {
		keptBy = a.kept.lookup(req.Identity, req.Root, ld.rev)
	}
	// inBlocks is the text of the kept blocks the recent turns show: known
	// once the window is, so a second pass packs without what they show.
	inBlocks := ""
	var shown func(memory.Item) bool
	if len(keptBy) > 0 {
		shown = func(it memory.Item) bool { return a.q.shows(inBlocks, it) }
	}
	withBlock := func(m memory.Message) (string, int) {
		if m.Role != "user" || len(keptBy) == 0 {
			return "", 0
		}
		b := keptBy[keyOf(m)]
		if b == "" {
			return "", 0
		}
		if blockCosts == nil {
			blockCosts = map[string]int{}
		}
		c, ok := blockCosts[b]
		if !ok {
			raw, err := blockRaw(a.opts.Position.role(), b)
			if err == nil {
				c = a.deps.Counter.RawMessage(model, raw)
			}
			blockCosts[b] = c
		}
		return b, c
	}
	blockCost := func(m memory.Message) int {
		_, c := withBlock(m)
		return c
	}

	// A new-only client always gets the summary (the history before it is
	// not loaded); a full-history client only when its own history overflows.
	withSummary := !fullHistory
	var pc *partCosts
	var (
		fx       fixedParts
		all      bool // the block's selection took every passage to be shown
		blk      blocks
		sections map[string]int
		kept     []memory.Message
		spent    int
		// blocksFrom is the index in kept of the first turn shown with
		// its kept block: older turns' blocks were dropped first.
		blocksFrom int
		// window is the recent turns' window, step what it moves by.
		window, step int
		// refilters counts the passes that chose the passages again for
		// the turns the window dropped.
		refilters int
	)
	for pass := 0; ; pass++ {
		if pc == nil {
			pc = a.newPartCosts(model, req.Conversation, ld, keep)
			pc.shown = shown
			pc.stable, pc.late = stableFacts, lateFacts
		}
		fx = a.selectFixed(pc, budget, room, ld, withSummary)
		if !asked {
			fx.recallShare, fx.fromSummary = statementShare, 0
		}
		var (
			sel selection
			err error
		)
		sel, all = pc.pack(fx, 0)
		blk, sections, err = a.block(model, sel, room)
		if err != nil {
			return memory.Prepared{}, false, err
		}
		// The recent turns' window is sized by what stays the same from
		// request to request — the budget, the system prompt, the stable
		// block, what recall may take (not what it took) and the current
		// turn rounded up — and moves in steps (recentWindow), so the
		// prefix up to the recalled block repeats for many turns.
		allowance := 0
		if len(ld.items) > 0 {
			allowance = min(recallShare, fx.room)
		}
		step = max(budget/16, 1)
		window = budget - priming - parts["system"] - blk.stableCost - allowance - (parts["current"]+step-1)/step*step
		kept, blocksFrom, spent = recentWindow(offered, cost, blockCost, window, room-blk.cost)
		if pass == 0 && len(keptBy) > 0 {
			var shown strings.Builder
			for _, m := range kept[blocksFrom:] {
				if b, _ := withBlock(m); b != "" {
					shown.WriteString(b)
				}
			}
			if shown.Len() > 0 {
				inBlocks, pc = shown.String(), nil
				continue
			}
		}
		// The passages were chosen for a filter that took the turns the
		// window just dropped as shown: when that changes what a recalled
		// passage shows, choose again with those turns recallable. The
		// window hardly moves for it (it is sized by what recall may
		// take, not by what it took), so one pass settles it; refilters
		// bounds the passes a window that keeps moving could take.
		if d := len(offered) - len(kept); d != dropped && refilters < maxRefilters {
			moved := inPrompt.touch(ld.items, min(d, dropped), max(d, dropped))
			dropped, keep = d, inPrompt.recallFilter(d)
			if moved {
				pc = nil
				refilters++
				continue
			}
		}
		if withSummary || len(kept) == len(candidates) || ld.summary == nil { // from > 0: never all
			break
		}
		withSummary = true
	}
	// Tokens are left — every recent turn fits, or the window, which moves
	// in steps, stopped short of the room: they go to more recalled
	// passages, within what the recent turns leave (the same pinned facts,
	// summary and facts, which the extra tokens do not change). The
	// recalled block comes after the recent turns, so its size never moves
	// the repeated prefix. Unless every passage is in already: packing
	// again would choose the same ones, and the block, which cost at most
	// room-spent, would not shrink.
	left := room - blk.cost - spent
	keeps := req.Mode.Stores() && a.keepsRecall(req, fullHistory)
	keepLeft := left
	if keeps {
		// This turn's block is kept and shown with it from the next
		// request on: filled at most to the window's low watermark (where
		// a cut leaves it), it stays there while the turns to come fill
		// the rest, instead of being cut at once. What the room holds
		// beyond it goes to a second block, shown with this request only
		// (once, below). Not for a request that may be a full-history
		// chat's first (keepsFirst): it looks just like a client that
		// sends only its newest turn, whose recall
		// must not shrink for a chat that may never come; its block is
		// kept only if it leaves the window at its low watermark anyway
		// (below).
		keepLeft = min(left, int(windowLow*float64(window))-spent-(blk.cost-blk.stableCost))
	}
	fill := a.opts.FillRecall && asked && len(ld.items) > 0
	fillTo := func(left int) error {
		if !fill || all || left < minPassageCost {
			return nil
		}
		sel, _ := pc.pack(fx, left)
		b2, s2, err := a.block(model, sel, room-spent)
		if err == nil && b2.cost > blk.cost {
			blk, sections = b2, s2
		}
		return err
	}
	if err := fillTo(keepLeft); err != nil {
		return memory.Prepared{}, false, err
	}
	// A block is kept only when it leaves the window at about its low
	// watermark (within a step), as a block filled for keeping does: one
	// that leaves less room would have the next requests cut the window,
	// and the older blocks with it, within a turn or two (a chat whose
	// every turn asks); not kept, only this block leaves, where it stood,
	// as it would without KeepRecall, and it fills the room as it would.
	keepsBlock := spent+blk.cost-blk.stableCost <= int(windowLow*float64(window))+step
	var (
		// once is the block of the passages this request shows and the
		// next does not: what the room holds beyond the kept block, so
		// that a turn whose block is kept recalls as much as one whose
		// block is not. It goes after the kept block, which the next
		// request repeats.
		once       blocks
		onceRecall int // its passages' line costs
	)
	switch {
	case keeps && !keepsBlock:
		if err := fillTo(left); err != nil {
			return memory.Prepared{}, false, err
		}
	case keeps && fill && !all:
		pc.showAlso(blk.recalled)
		sel, _ := pc.pack(fx, left)
		var err error
		once, onceRecall, err = a.passagesBlock(model, sel, room-spent-blk.cost)
		if err != nil {
			return memory.Prepared{}, false, err
		}
	}

	// Stable to volatile, so that a provider's prompt cache keeps as much
	// of the previous request's prefix as can be kept: the client's system
	// messages, the stable memory, the recent turns, what this question
	// recalled, the current turn.
	out := make([]json.RawMessage, 0, len(system)+2+len(kept)+len(current))
	out = append(out, raws(system)...)
	var bs []memory.Block
	add := func(text string, stable bool) error {
		if text == "" {
			return nil
		}
		raw, err := blockRaw(a.opts.Position.role(), text)
		if err != nil {
			return err
		}
		bs = append(bs, memory.Block{At: len(out), Stable: stable, Text: text})
		out = append(out, raw)
		return nil
	}
	if err := add(blk.stable, true); err != nil {
		return memory.Prepared{}, false, err
	}
	for i, m := range kept {
		if b, _ := withBlock(m); b != "" && i >= blocksFrom {
			if err := add(b, false); err != nil {
				return memory.Prepared{}, false, err
			}
		}
		out = append(out, rawOf(m))
	}
	if err := add(blk.recalled, false); err != nil {
		return memory.Prepared{}, false, err
	}
	if err := add(once.recalled, false); err != nil {
		return memory.Prepared{}, false, err
	}
	if req.Mode.Stores() {
		// Only a turn that is stored comes back as a recent turn (or is
		// resent as one: a read-mode question is not part of its chat).
		keptBlock := blk.recalled
		if !keepsBlock {
			keptBlock = ""
		}
		a.keepBlock(req, ld, fullHistory, current, keptBlock)
	}
	out = append(out, raws(current)...)
	for k, v := range sections {
		parts[k] = v
	}
	parts[partRecall] += onceRecall
	parts["memory"] = blk.cost + once.cost
	parts["recent"] = spent
	return memory.Prepared{
		Messages:       out,
		TokensOriginal: original,
		TokensSent:     priming + parts["system"] + blk.cost + once.cost + spent + parts["current"],
		Budget:         budget,
		Parts:          parts,
		Blocks:         bs,
	}, len(kept) == len(candidates), nil
}

// unsummarisedOf returns ld's stored messages that are not system
// messages and come after the summary: ld.stored itself when that is all
// of them (it is not to be changed), a copy of those otherwise.
func unsummarisedOf(ld loaded) []memory.Message {
	skip := func(m memory.Message) bool {
		return memory.IsSystem(m.Role) || (ld.summary != nil && m.Seq <= ld.summary.ToSeq)
	}
	for i, m := range ld.stored {
		if !skip(m) {
			continue
		}
		out := make([]memory.Message, i, len(ld.stored)-1)
		copy(out, ld.stored[:i])
		for _, m := range ld.stored[i+1:] {
			if !skip(m) {
				out = append(out, m)
			}
		}
		return out
	}
	return ld.stored
}

// currentStart returns the index in conv where the current turn starts:
// the client's current turn (memory.SplitCurrent of rest, which conv ends
// with), extended back to the newest user message when the client sent
// only a tool loop (its question is stored history).
func currentStart(conv []memory.Message, historyLen int, rest []memory.Message) int {
	earlier, _ := memory.SplitCurrent(rest)
	start := historyLen + len(earlier)
	for i := len(conv) - 1; i >= 0; i-- {
		if conv[i].Role == "user" {
			return min(start, i)
		}
	}
	return start
}

// inView returns passage it without the turns shown reports in the prompt
// already, and whether anything is left to show: not when every hit of it
// is shown (the turns around a hit are there for it), nor when every turn
// is. An item without turns is returned as it is.
func inView(it memory.Item, shown func(memory.PassageTurn) bool) (memory.Item, bool) {
	n, hits, hitsShown := 0, 0, 0
	for _, t := range it.Turns {
		s := shown(t)
		if s {
			n++
		}
		if t.Hit {
			hits++
			if s {
				hitsShown++
			}
		}
	}
	switch {
	case n == 0:
		return it, true
	case n == len(it.Turns) || (hits > 0 && hitsShown == hits):
		return it, false
	}
	turns := make([]memory.PassageTurn, 0, len(it.Turns)-n)
	for _, t := range it.Turns {
		if !shown(t) {
			turns = append(turns, t)
		}
	}
	it.Turns, it.Text = turns, memory.PassageText(turns)
	return it, true
}

// raws returns the Raw of every message of the lists, in order.
func raws(lists ...[]memory.Message) []json.RawMessage {
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	out := make([]json.RawMessage, 0, n)
	for _, l := range lists {
		for _, m := range l {
			out = append(out, rawOf(m))
		}
	}
	return out
}

// windowAnchor returns where in history (the stored turns after the
// summary) the recent turns may start. When the store gave all it was asked
// for (Options.RecentMessages) and the first of them does not follow the
// summary (its sequence number is past the summary's end, or 0 without
// one, plus one), older
// turns were not loaded and the loaded window slides by one message per
// message: the anchor is then the first message of a block of
// RecentMessages/2 sequence numbers, so it moves in steps too. Otherwise
// history starts where the summary ends (or the conversation starts, at
// sequence number 1), a stable place: 0. A load that starts right after the summary is such a
// place: no turn is missing between them, and anchoring it in steps would
// drop turns a request earlier kept (a break of the repeated prefix just
// before compaction moves the summary anyway).
func (a *Assembler) windowAnchor(ld loaded, history []memory.Message) int {
	n := a.opts.RecentMessages
	var covered int64 // the last sequence number before the turns to show: the summary's end
	if ld.summary != nil {
		covered = ld.summary.ToSeq
	}
	if n <= 0 || len(ld.stored) < n || len(history) == 0 || covered+1 >= ld.stored[0].Seq {
		return 0
	}
	step := int64(max(n/2, 1))
	for i := 1; i < len(history); i++ {
		if history[i].Seq/step != history[i-1].Seq/step {
			return i
		}
	}
	return 0
}
