package prompt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/telemetry"
)

// loaded is the memory one request may draw on.
type loaded struct {
	summary *memory.Summary
	// summaryEdited: the conversation's summary was left out, the
	// request's resent history edits or drops a message it covers
	// (editsSummary).
	summaryEdited bool
	// unsaid are the keys of the stored messages whose text the request's
	// resent history edits or drops (unsaid): the facts and passages only
	// they stated are left out (withoutUnsaid).
	unsaid map[string]bool
	stored []memory.Message // newest stored messages, oldest first
	// resent are the keys of the stored messages the client's own
	// messages repeat, left out of stored (continuation): in the prompt
	// as the client's copies, so recall does not show them.
	resent []string
	facts  []memory.Fact // current facts, pinned ones included, best first
	items  []memory.Item // recalled passages, best first
	// current are all the user's current facts, with Options.StableFacts
	// and a Recaller (recall gives only those it ranks best for the turn;
	// without recall, only pinned facts are shown): what the stable block
	// chooses from.
	current []memory.Fact
	now     time.Time
	// rev are the user's revisions read before the parts (nil: unknown).
	rev *memory.Revisions
	// keptEpoch and heldEpoch are the kept blocks' and held summaries'
	// counts of forgets before the parts loaded: an erasure of the user
	// since keeps what they show from being kept.
	keptEpoch, heldEpoch uint64
	// degraded names the parts left out (memory.Degraded*), sorted.
	degraded []string
	// errs are why, one per degraded part.
	errs []error
}

// partHistory names the stored recent turns among the parts load fetches
// (the others are partSummary, partFacts and partRecall); the parts are the
// load-latency metric's labels and, failing, memory.Degraded* values.
const partHistory = "history"

// partNewChat names, among the parts load runs, the question whether the
// request is a new chat's first turn after all (memory.Request.AskNewChat);
// failing, it is memory.DegradedNewChat.
const partNewChat = memory.DegradedNewChat

// partResult is one part's outcome.
type partResult struct {
	part    string
	err     error
	took    time.Duration
	summary *memory.Summary
	// edited: the summary was left out, the resent history edits what it
	// covers (editsSummary).
	edited bool
	// unsaid: see loaded.unsaid.
	unsaid  map[string]bool
	stored  []memory.Message
	facts   []memory.Fact
	current []memory.Fact
	rec     memory.Recalled
	// newChat: AskNewChat's answer.
	newChat bool
}

// load fetches, concurrently, the conversation's summary and stored history
// (for a client that sends only its newest turn, unless req.NoRecent;
// neither for req.NewChat, nor used when req.AskNewChat, asked beside
// them from the start, answers true), the user's pinned facts, and
// recall (facts ranked for the query and recalled passages).
//
// Each part is dropped on its own: one that fails, or is not back by its
// deadline, is left out and named in degraded, and the others are used.
// The store parts (history, summary, pinned facts) get Options.LoadTimeout;
// recall waits for its query's embedding up to Options.EmbedTimeout, then
// searches with full text alone (degraded "embedding"), and gets
// LoadTimeout more for its store queries. Without recall's facts, the
// pinned facts loaded directly stand in. ctx bounds everything: once it
// ends load returns its error (the caller gave up; nothing is assembled
// for it), and the parts still running are cancelled with it.
func (a *Assembler) load(ctx context.Context, req memory.Request, rest []memory.Message, fullHistory bool) (loaded, error) {
	start := time.Now()
	now := a.opts.Now()
	ld := loaded{now: now}
	// A new chat's first turn (req.NewChat) gets nothing of the
	// conversation it landed in: neither its summary nor its stored turns.
	conv := req.Conversation != "" && !req.NewChat
	earlier, _ := memory.SplitCurrent(rest)
	storeDL, recallDL := a.deadlines(start)
	results := make(chan partResult, 5)
	pending := map[string]bool{}
	run := func(part string, deadline time.Time, f func(ctx context.Context, r *partResult) error) {
		pending[part] = true
		go func() {
			pctx, cancel := context.WithDeadline(ctx, deadline)
			defer cancel()
			r := partResult{part: part}
			pctx, span := telemetry.Start(pctx, "memory.load."+part)
			r.err = f(pctx, &r)
			telemetry.End(span, r.err)
			r.took = time.Since(start)
			results <- r
		}()
	}
	summaries := conv && a.deps.Summaries != nil
	recent := conv && !fullHistory && !req.NoRecent && a.opts.RecentMessages > 0
	if (summaries || recent) && req.AskNewChat != nil {
		// Whether the request is a new chat's first turn after all (the
		// signal the gateway processes share), asked from the start,
		// beside the revisions' read and the parts, never after them.
		run(partNewChat, storeDL, func(ctx context.Context, r *partResult) error {
			var err error
			r.newChat, err = req.AskNewChat(ctx)
			return err
		})
	}
	// The user's revision counters, read once before the parts run (by
	// routing, for a request it placed: req.Revisions): every part's reads
	// are current as of them (a cache keeps what it read under them).
	// Without them the parts read the store.
	ld.keptEpoch, ld.heldEpoch = a.epochs()
	rev := req.Revisions
	if rev == nil {
		rev = a.revisions(ctx, req.Tenant, req.User, storeDL)
	}
	ld.rev = rev
	// The edit check's read of the conversation's first messages (head),
	// for a full-history request: started while the parts load once one
	// of them shows it is needed (kept recall blocks, a summary, a fact
	// the conversation stated once), so that it does not follow them.
	var hr *headRead
	kept := false
	if fullHistory && conv && a.deps.Heads != nil {
		hctx, cancel := context.WithDeadline(ctx, storeDL)
		defer cancel()
		hr = newHeadRead(func() ([]memory.Held, error) { return a.head(hctx, rev, req.Identity) })
		if kept = a.keptFor(req, rev); kept {
			hr.start()
		}
	}
	if summaries {
		run(partSummary, storeDL, func(ctx context.Context, r *partResult) error {
			s, err := a.deps.Summaries.LatestSummary(ctx, rev, req.Identity)
			if errors.Is(err, memory.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			if hr != nil {
				// The request's save will drop a summary of messages its
				// history edits: its own prompt goes without it.
				held, err := hr.wait(ctx)
				if err != nil {
					return err
				}
				held, client, all := a.judged(held, earlier, rest)
				if editsSummary(held, s.ToSeq, client, a.deps.StoredForm) {
					r.edited, r.unsaid = true, unsaid(held, all, a.deps.StoredForm)
					telemetry.Note(ctx, "memgate.summary.left_out", "edited")
					return nil
				}
			}
			r.summary = &s
			return nil
		})
	}
	if recent {
		run(partHistory, storeDL, func(ctx context.Context, r *partResult) error {
			msgs, err := a.deps.History.Recent(ctx, rev, req.Identity, a.opts.RecentMessages)
			r.stored = msgs
			return err
		})
	}
	if a.deps.Facts != nil {
		run(partFacts, storeDL, func(ctx context.Context, r *partResult) error {
			fs, err := a.deps.Facts.Facts(ctx, rev, req.Tenant, req.User, now, false)
			for _, f := range fs {
				if !f.Current(now) {
					continue
				}
				if hr != nil && (f.Pinned || a.deps.Recaller != nil) && statedOnce(f, req.Conversation) {
					// A fact the prompt may show (pinned, or recall may
					// give it) that an edit could take back.
					hr.start()
				}
				if f.Pinned {
					r.facts = append(r.facts, f)
				}
				if a.opts.StableFacts && a.deps.Recaller != nil {
					r.current = append(r.current, f)
				}
			}
			return err
		})
	}
	if a.deps.Recaller != nil {
		embedBy := start.Add(a.opts.EmbedTimeout)
		if a.opts.EmbedTimeout <= 0 {
			embedBy = time.Time{}
		}
		run(partRecall, recallDL, func(ctx context.Context, r *partResult) error {
			rec, err := a.deps.Recaller.Recall(ctx, memory.RecallQuery{
				Identity:          req.Identity,
				Text:              recallText(rest),
				CrossConversation: req.CrossConversation,
				Now:               recallNow(now, req.At),
				Budget:            a.passageBudget(req),
				Revisions:         rev,
				EmbedBy:           embedBy,
			})
			r.rec = rec
			return err
		})
	}

	got := map[string]partResult{}
	// The parts' own contexts end at their deadlines; the timer stops
	// waiting for one that ignores its context.
	late := time.NewTimer(max(time.Until(later(storeDL, recallDL)), 0) + lateGrace)
	defer late.Stop()
wait:
	for len(got) < len(pending) {
		select {
		case r := <-results:
			got[r.part] = r
			a.m.observe(r.part, r.took)
		case <-late.C:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	fail := func(part string, err error) {
		ld.degraded = append(ld.degraded, part)
		ld.errs = append(ld.errs, fmt.Errorf("load %s: %w", part, err))
	}
	part := func(name string) (partResult, bool) {
		if !pending[name] {
			return partResult{}, false
		}
		r, ok := got[name]
		if !ok {
			fail(name, context.DeadlineExceeded)
			return r, false
		}
		if r.err != nil {
			fail(name, r.err)
			return r, false
		}
		return r, true
	}
	// A new chat's first turn after all gets nothing of the conversation
	// it landed in (as req.NewChat): what loaded of it goes unused, what
	// did not is not missed.
	if r, ok := part(partNewChat); !ok || !r.newChat {
		if r, ok := part(partSummary); ok {
			ld.summary, ld.summaryEdited, ld.unsaid = r.summary, r.edited, r.unsaid
		}
		if r, ok := part(partHistory); ok {
			ld.stored, ld.resent = continuation(r.stored, rest, req.ReplaysThinking)
		}
	}
	recalled := false
	if r, ok := part(partRecall); ok {
		ld.facts, ld.items = r.rec.Facts, r.rec.Items
		recalled = true
		if r.rec.Lexical {
			ld.degraded = append(ld.degraded, memory.DegradedEmbedding)
		}
	}
	if pending[partFacts] {
		r, ok := got[partFacts]
		if ok && r.err == nil {
			ld.current = r.current
		}
		switch {
		case recalled && ok && r.err == nil:
			ld.facts = orderFacts(r.facts, ld.facts)
		case recalled:
			// Recall's facts include the pinned ones.
		case ok && r.err == nil:
			ld.facts = orderFacts(r.facts, nil)
		default:
			part(partFacts)
		}
	}
	if hr != nil && !ld.summaryEdited && ld.mayShowUnsaid(req.Conversation, kept) {
		// An edit the summary's check did not find (of a message it does
		// not cover, or in a chat without one) takes back what the old
		// text of the user's said too. The read started while the parts
		// loaded serves; without one (only a recalled passage asks for
		// it) it is read now.
		held, err := hr.wait(ctx)
		if err != nil {
			// Unknown: the prompt is what it would be without the check;
			// the request's save still retracts what an edit unsays.
			a.logger.WarnContext(ctx, "checking a resent history for edits: read failed",
				"conversation", req.Conversation, "error", err)
		}
		held, _, all := a.judged(held, earlier, rest)
		ld.unsaid = usersUnsaid(held, all, a.deps.StoredForm)
	}
	if ld.summaryEdited || len(ld.unsaid) > 0 {
		ld.withoutUnsaid(req.Conversation)
	}
	slices.Sort(ld.degraded)
	if err := ctx.Err(); err != nil {
		// The request's caller gave up: nothing is assembled for it.
		return loaded{}, fmt.Errorf("load memory: %w", err)
	}
	return ld, nil
}

// withoutUnsaid leaves out of ld what the request's edit takes back, which
// its save, made after its prompt is sent, removes from memory: the facts
// conv's messages ld.unsaid stated, unless stated again (Mentions over
// one: the save keeps a fact another live message also stated), the
// passages of conv showing those messages, and, when the edit changes
// what the newest summary covers (summaryEdited), conv's summaries.
func (ld *loaded) withoutUnsaid(conv string) {
	said := func(f memory.Fact) bool {
		return f.Conversation == conv && f.Mentions <= 1 && ld.unsaid[f.Source]
	}
	if len(ld.unsaid) > 0 {
		ld.facts = slices.DeleteFunc(slices.Clone(ld.facts), said)
		ld.current = slices.DeleteFunc(slices.Clone(ld.current), said)
	}
	ld.items = slices.DeleteFunc(slices.Clone(ld.items), func(it memory.Item) bool {
		if it.Conversation != conv {
			return false
		}
		if it.Kind == "summary" {
			return ld.summaryEdited
		}
		if ld.unsaid[it.Ref] {
			return true
		}
		for _, t := range it.Turns {
			if ld.unsaid[t.Key] {
				return true
			}
		}
		return false
	})
}

// mayShowUnsaid reports whether ld holds anything of conv that an edit of
// the request's history could take back, so that the history is worth
// checking (head, unsaid): a fact of conv stated by one message of it
// (Mentions at most one, a Source), a passage of conv, or, kept, the
// recalled blocks of its resent turns (keepsRecall). A request whose
// memory holds none of these reads nothing to find out.
func (ld *loaded) mayShowUnsaid(conv string, kept bool) bool {
	once := func(f memory.Fact) bool { return statedOnce(f, conv) }
	return kept || slices.ContainsFunc(ld.facts, once) || slices.ContainsFunc(ld.current, once) ||
		slices.ContainsFunc(ld.items, func(it memory.Item) bool { return it.Conversation == conv && it.Kind != "summary" })
}

// statedOnce reports whether f is a fact of conv stated by one message of
// it (Mentions at most one, a Source): one an edit of that message takes
// back.
func statedOnce(f memory.Fact, conv string) bool {
	return f.Conversation == conv && f.Mentions <= 1 && f.Source != ""
}

// keptFor reports whether req's resent turns would be rendered with
// recalled blocks kept for them (keepsRecall) as of rev.
func (a *Assembler) keptFor(req memory.Request, rev *memory.Revisions) bool {
	return a.keepsRecall(req, true) && len(a.kept.lookup(req.Identity, req.Root, rev)) > 0
}

// revisions reads the user's revision counters for one request, within
// the store parts' deadline; nil without a RevisionReader or when the
// lookup fails (the parts then read the store).
func (a *Assembler) revisions(ctx context.Context, tenant, user string, deadline time.Time) *memory.Revisions {
	if a.deps.Revisions == nil {
		return nil
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	rev, err := a.deps.Revisions.ItemRevisions(ctx, tenant, user)
	if err != nil {
		return nil
	}
	return &rev
}

// orderFacts returns recall's ranked facts (most relevant to the current
// turn first, pinned and not), then the pinned facts that are not among
// them, most recently stated first: the order in which pins win the pinned
// share (selectFixed).
func orderFacts(pinned, ranked []memory.Fact) []memory.Fact {
	have := make(map[[2]string]bool, len(ranked))
	for _, f := range ranked {
		have[[2]string{f.Key, f.Value}] = true
	}
	var rest []memory.Fact
	for _, f := range pinned {
		if !have[[2]string{f.Key, f.Value}] {
			rest = append(rest, f)
		}
	}
	if len(rest) == 0 {
		return ranked
	}
	slices.SortStableFunc(rest, func(a, b memory.Fact) int { return b.UpdatedAt.Compare(a.UpdatedAt) })
	out := make([]memory.Fact, 0, len(ranked)+len(rest))
	return append(append(out, ranked...), rest...)
}

// lateGrace is how long load waits past the last part's deadline for a part
// whose store ignores its context, before it leaves it out.
const lateGrace = 20 * time.Millisecond

// deadlines returns when the store parts and recall must be back for a
// request that started loading at start. Without a LoadTimeout the parts
// are bounded by the request's context alone.
func (a *Assembler) deadlines(start time.Time) (store, rec time.Time) {
	far := start.Add(24 * time.Hour)
	if a.opts.LoadTimeout <= 0 {
		return far, far
	}
	store = start.Add(a.opts.LoadTimeout)
	return store, start.Add(max(a.opts.EmbedTimeout, 0) + a.opts.LoadTimeout)
}

// later returns the later of two times.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// continuation returns the stored messages that go before the client's new
// messages (rest), without the reasoning block a reply's text opens with
// (withoutThinking), and without their reasoning (withoutReasoning) but where a
// tool loop the request continues needs it back (loopStart): replies the
// upstream broke off (memory.Message.Failed)
// are never sent back as if they had been said, and the stored tail that
// the client repeats at the start of rest — the user turn and assistant tool
// call a tool loop resends with its results, or a retried message — is left
// to the client's copy, so nothing is sent twice. So is the stored last
// turn when rest resends its question with a continuation of its own (a
// tool loop whose call the client holds otherwise than memgate stored it:
// regenerated, or its reply stored redacted). The keys of the stored
// messages it leaves to the client's copies are returned too.
func continuation(stored, rest []memory.Message, thinking bool) (_ []memory.Message, resent []string) {
	out := make([]memory.Message, 0, len(stored))
	for _, m := range stored {
		// A stored message is not trusted to be one JSON value (a store
		// or cache holding two in one would add a message to the prompt):
		// one that is not is left out (one without Raw is encoded from
		// its fields). The prompt's other messages are the client's, as
		// parsed, and the memory block memgate encodes.
		if !m.Failed() && (len(m.Raw) == 0 || json.Valid(m.Raw)) {
			out = append(out, m)
		}
	}
	out, resent = resentTail(out, rest)
	loop := loopStart(out, rest)
	for i := range out {
		out[i] = withoutThinking(withoutReasoning(out[i], i >= loop, thinking))
	}
	return out, resent
}

// resentTail returns out less the stored tail the client repeats at the
// start of rest (see continuation), and the keys of what it left out.
func resentTail(out, rest []memory.Message) (_ []memory.Message, resent []string) {
	for k := min(len(out), len(rest)); k > 0; k-- {
		same := true
		for i := 0; i < k; i++ {
			if out[len(out)-k+i].Fingerprint() != rest[i].Fingerprint() {
				same = false
				break
			}
		}
		if same {
			return out[:len(out)-k], keysOf(out[len(out)-k:])
		}
	}
	if len(rest) > 1 && rest[0].Role == "user" && rest[1].Role != "user" {
		// The stored last turn starts at its (last) user message.
		j := len(out) - 1
		for j >= 0 && out[j].Role != "user" {
			j--
		}
		if j >= 0 && out[j].Fingerprint() == rest[0].Fingerprint() {
			return out[:j], keysOf(out[j:])
		}
	}
	return out, nil
}

// loopStart returns the index of the first of stored, the stored turns
// sent before rest, that is part of the current turn (memory.SplitCurrent)
// of stored followed by rest — the tool loop a client that sends only its
// newest messages continues with its tool results — or len(stored) when
// rest starts a turn of its own (or is empty).
func loopStart(stored, rest []memory.Message) int {
	if earlier, current := memory.SplitCurrent(rest); len(earlier) > 0 || len(current) == 0 || current[0].Role == "user" {
		return len(stored)
	}
	earlier, _ := memory.SplitCurrent(stored)
	return len(earlier)
}

// keysOf returns the stored keys of msgs.
func keysOf(msgs []memory.Message) []string {
	keys := make([]string, 0, len(msgs))
	for _, m := range msgs {
		if m.Key != "" {
			keys = append(keys, m.Key)
		}
	}
	return keys
}

// shortQuery is the length (in bytes) under which a user message that does
// not stand alone (standsAlone) is joined with the assistant turn before it
// to make a recall query ("yes, do that").
const shortQuery = 40

// recallText is the recall query for a client's messages: the newest user
// message, preceded by the assistant message before it (its answer,
// without the reasoning it opened with: memory.Message.Answer) when it is
// short and does not stand alone.
func recallText(msgs []memory.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		text := msgs[i].Content
		if len(strings.TrimSpace(text)) < shortQuery && !standsAlone(text) {
			for j := i - 1; j >= 0; j-- {
				if answer := msgs[j].Answer(); msgs[j].Role == "assistant" && answer != "" {
					text = answer + "\n" + text
					break
				}
			}
		}
		return text
	}
	return ""
}

// standsAlone reports whether a short user message says what it is about
// by itself: a question (it ends with a question mark) with at least two
// words that are neither stopwords, nor interrogatives (asks' list) or
// auxiliaries, nor words that point back at what was said before ("it",
// "that", "she", "there", "isso", "ela"), and none of the latter. "When did Ana run a
// race?" stands alone, and its recall is not diluted by the assistant's
// last reply; "yes please", "why?" and "what did she say?" lean on the
// turn before, which joins their recall query.
func standsAlone(text string) bool {
	if !strings.HasSuffix(strings.TrimSpace(text), "?") {
		return false
	}
	content := 0
	for w := range memory.Words(text) {
		w = strings.ToLower(w)
		switch {
		case referenceWords[w]:
			return false
		case !memory.Stopword(w) && !interrogatives[w] && !auxiliaries[w]:
			content++
		}
	}
	return content >= 2
}

// referenceWords point back at something said before (English and
// Portuguese pronouns and demonstratives).
var referenceWords = map[string]bool{
	"it": true, "its": true, "that": true, "this": true, "these": true, "those": true,
	"they": true, "them": true, "their": true, "he": true, "him": true, "his": true,
	"she": true, "her": true, "there": true, "one": true, "ones": true, "same": true,
	"isso": true, "isto": true, "aquilo": true, "esse": true, "essa": true, "esses": true,
	"essas": true, "ele": true, "ela": true, "eles": true, "elas": true, "dele": true,
	"dela": true, "lá": true, "mesmo": true, "mesma": true,
}

// auxiliaries carry a question's grammar without naming its subject: the
// auxiliary verbs that are not stopwords (memory.Stopword).
var auxiliaries = map[string]bool{
	"will": true, "would": true, "should": true, "could": true, "shall": true,
	"may": true, "might": true, "must": true, "am": true, "were": true, "been": true,
	"é": true, "foi": true,
}

// within returns a for one request of tenant's user whose context is ctx:
// its counter is the owner's (counter) and stops counting once ctx ends
// (ctxCounter), so a Prepare its caller gave up on (the proxy answers
// without memory at its deadline) stops tokenizing within one text instead
// of assembling the whole prompt for nobody.
func (a *Assembler) within(ctx context.Context, tenant, user string) *Assembler {
	if ctx.Done() == nil && a.deps.Owned == nil {
		return a
	}
	b := *a
	b.deps.Counter = a.counter(tenant, user)
	if ctx.Done() != nil {
		b.deps.Counter = ctxCounter{inner: b.deps.Counter, done: ctx.Done()}
	}
	return &b
}

// counter returns what a request of tenant's user counts with: its
// owner's counter (Deps.Owned), else the shared one.
func (a *Assembler) counter(tenant, user string) TokenCounter {
	if a.deps.Owned == nil {
		return a.deps.Counter
	}
	return a.deps.Owned(tenant, user)
}

// ctxCounter counts with inner until ctx ends; after that it answers at
// once with a bound instead — a text's bytes, which no encoding exceeds on
// valid UTF-8 — so the rest of an abandoned assembly costs nothing. Its
// caller checks ctx before using what it assembled.
type ctxCounter struct {
	inner TokenCounter
	done  <-chan struct{} // the context's Done
}

// ended reports whether the context ended (a receive that does not block,
// cheaper than Err's lock).
func (c ctxCounter) ended() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c ctxCounter) Messages(model string, msgs []json.RawMessage) int {
	if c.ended() {
		n := 3
		for _, m := range msgs {
			n += 3 + len(m)
		}
		return n
	}
	return c.inner.Messages(model, msgs)
}

func (c ctxCounter) RawMessage(model string, raw json.RawMessage) int {
	if c.ended() {
		return 3 + len(raw)
	}
	return c.inner.RawMessage(model, raw)
}

func (c ctxCounter) Message(model string, m memory.Message) int {
	if c.ended() {
		if len(m.Raw) == 0 {
			return 3 + len(m.Role) + len(m.Content)
		}
		return 3 + len(m.Raw)
	}
	return c.inner.Message(model, m)
}

func (c ctxCounter) Text(model, s string) int {
	if c.ended() {
		return len(s)
	}
	return c.inner.Text(model, s)
}

func (c ctxCounter) SystemMessage(model, text string) int {
	if c.ended() {
		return 4 + len(text)
	}
	return c.inner.SystemMessage(model, text)
}

func (c ctxCounter) ContextWindow(model string) int { return c.inner.ContextWindow(model) }

// recallNow is the time a question's time words are read against: when its
// turn was said (a relayed or replayed conversation's X-Memory-Timestamp),
// else now.
func recallNow(now, at time.Time) time.Time {
	if at.IsZero() {
		return now
	}
	return at
}
