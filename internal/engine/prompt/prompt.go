// Package prompt decides what the upstream sees: within a token budget, the
// client's system messages, the stable memory block (pinned facts, the
// rolling summary, facts about the user), the recent turns — from the store
// when the client sends only its newest turn — the recalled block (passages
// recalled for this question) and the current turn.
package prompt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"text/template"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/telemetry"
)

// HistoryReader loads a conversation's stored messages. Each read is
// current as of rev, the user's revision counters the request read once
// (nil: none were read, and the read goes to the store).
type HistoryReader interface {
	// Recent returns up to n newest live messages, oldest first.
	Recent(ctx context.Context, rev *memory.Revisions, id memory.Identity, n int) ([]memory.Message, error)
}

// SummaryReader loads a conversation's rolling summary (rev: see
// HistoryReader).
type SummaryReader interface {
	// LatestSummary returns the newest summary version, or memory.ErrNotFound.
	LatestSummary(ctx context.Context, rev *memory.Revisions, id memory.Identity) (memory.Summary, error)
}

// FactReader loads what is known about a user (rev: see HistoryReader).
type FactReader interface {
	// Facts returns the user's current facts, most recently updated first.
	Facts(ctx context.Context, rev *memory.Revisions, tenant, user string, now time.Time, history bool) ([]memory.Fact, error)
}

// RevisionReader reads a user's revision counters, in one lookup: what
// every cached read of a request is current as of.
type RevisionReader interface {
	ItemRevisions(ctx context.Context, tenant, user string) (memory.Revisions, error)
}

// Recaller answers what a user said before that bears on their newest
// message (implemented by internal/engine/recall).
type Recaller interface {
	Recall(ctx context.Context, q memory.RecallQuery) (memory.Recalled, error)
}

// TokenCounter counts what chat messages cost for a model and knows the
// model's context window. *tokens.Counter implements it.
type TokenCounter interface {
	// Messages is what a request with msgs costs, reply priming included.
	Messages(model string, msgs []json.RawMessage) int
	// RawMessage is what one message costs inside a prompt.
	RawMessage(model string, raw json.RawMessage) int
	// Message is what RawMessage gives for m.Raw, counted from what
	// memory.ParseMessage read of it (a request's messages are decoded
	// once).
	Message(model string, m memory.Message) int
	// Text is what s encodes to.
	Text(model, s string) int
	// SystemMessage is what RawMessage gives for the system message whose
	// content is text, counted without parsing it (the memory block).
	SystemMessage(model, text string) int
	// ContextWindow is the model's context window.
	ContextWindow(model string) int
}

// Deps are an Assembler's collaborators. Only History and Counter are
// required; a nil Summaries, Facts or Recaller leaves that part out. With a
// Recaller, facts come from its answer and Facts is not used. Revisions,
// when set, is read once per request, before its parts run, and the read
// handed to each of them; without it (or when the lookup fails) they get
// nil.
//
// Heads, when set, checks a full-history request's resent history against
// its conversation's first messages (edits), as its save, made after the
// prompt is sent, will: a request that edits or drops a message the
// summary covers is assembled without the summary, and one that edits or
// drops any message (covered or not) without the facts only that message
// stated and the passages showing it. The check reads the messages (from
// Heads' cache, as a chat goes on) only when the summary is loaded or the
// request's memory holds a fact stated once or a passage of the
// conversation. StoredForm is a message as memgate stores it (sanitized
// and redacted, record.StoredForm), what the check compares a message the
// client sends otherwise with; nil: as sent.
//
// Owned, when set, gives the counter a request counts through, taken once
// per request for its owner, the user of a tenant: Counter's view whose
// remembered counts no other owner's request finds (*tokens.Counter's
// Owned), so a request's latency tells nothing of what others sent. nil:
// Counter counts every request.
type Deps struct {
	History    HistoryReader
	Summaries  SummaryReader
	Facts      FactReader
	Recaller   Recaller
	Counter    TokenCounter
	Owned      func(tenant, user string) TokenCounter
	Revisions  RevisionReader
	Heads      HeadReader
	StoredForm func(memory.Message) memory.Message
}

// Shares are the most each memory part may take of the budget, as fractions.
// Pinned bounds the pinned facts (beyond it, the pins most relevant to the
// current turn, then the most recent, win; the others may still come as
// facts, within Facts, when recall ranks them); Facts bounds the other facts.
//
// ExtractiveSummary caps, within Summary, a summary the extractive
// summariser wrote (memory.Summary.Summariser "extractive": sentences
// picked, no model); what it leaves of Summary goes to the passages.
//
// StatementRecall, with Options.FillWhen FillAsked, bounds the passages of
// a turn that asks nothing (0: none); it never raises them above Recall.
type Shares struct {
	Summary, Pinned, Facts, Recall float64
	ExtractiveSummary              float64
	StatementRecall                float64
}

// total is the sum of the shares.
func (sh Shares) total() float64 { return sh.Summary + sh.Pinned + sh.Facts + sh.Recall }

// Options tunes an Assembler.
type Options struct {
	// RecentMessages is how many of a conversation's newest stored messages
	// are loaded for a client that sends only its newest turn; 0 loads none.
	RecentMessages int
	// MaxContextTokens caps the budget; 0 leaves only the model's window.
	MaxContextTokens int
	// CompletionReserve is kept free for the reply when the request sets no
	// max_tokens.
	CompletionReserve int
	// Shares bound the memory block's parts; what they leave unused goes to
	// the recent turns.
	Shares Shares
	// FactsMax caps the unpinned facts injected (pinned ones are bounded by
	// the facts share only); 0 injects no unpinned facts.
	FactsMax int
	// Template is the memory block's text/template over BlockData; empty
	// uses DefaultTemplate.
	Template string
	// HistoryKeep is how many of a resent history's newest messages one
	// request stores beside its first memory.BranchHead
	// (capture.max_history_messages, memory.CutHistory); 0: all. A longer
	// history is stored as those and a window, which the conversation's
	// first messages do not show in order: the check of its edits
	// (Deps.Heads) compares its first memory.BranchHead messages only.
	HistoryKeep int
	// LoadTimeout bounds loading each stored part (recent turns, summary,
	// pinned facts) and recall's store queries; a part not back by then is
	// left out (Prepared.Degraded). 0: only the request's context bounds them.
	LoadTimeout time.Duration
	// EmbedTimeout is how long recall waits for its query's embedding
	// before it searches with full text alone (with LoadTimeout set).
	EmbedTimeout time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Position is the role the memory blocks are sent in: PositionSystem
	// (the default) or PositionUser.
	Position Position
	// FillRecall gives the tokens left when every recent turn fits to more
	// recalled passages. Off, recall keeps to its share and the prompt is
	// shorter: the recalled block is the volatile part of the prompt, which
	// a provider's prompt cache cannot serve.
	FillRecall bool
	// FillWhen is which turns FillRecall fills on: FillAlways (the
	// default, "") or FillAsked.
	FillWhen RecallFill
	// StableFacts keeps the stable memory block's facts the same from
	// turn to turn: it shows the pinned facts and the facts known when
	// the summary it shows was written (all facts, without a summary:
	// none), chosen newest first and not by relevance to the turn; the
	// facts learnt since (from the turns shown verbatim), ranked for the
	// turn, go with the recalled block, on a turn that asks something
	// (asks) when FillWhen is FillAsked, on every turn otherwise. Off,
	// the block shows the facts most relevant to the turn, and changes
	// with it.
	StableFacts bool
	// KeepRecall renders each past user turn with the recalled block it
	// was sent with, in place, so that what one request recalled is part of
	// the next request's repeated prefix; this question's recall then shows
	// only passages those blocks do not. The block a turn keeps is filled
	// to the recent turns' window's low watermark; with FillRecall, what
	// the room holds beyond it goes to a second block, after it, that only
	// this request shows, so the turn recalls as much as without keeping.
	// The blocks are kept in this
	// process, for KeepRecallConversations conversations (default 4096) of
	// up to RecentMessages turns each; a turn whose block is not held (a
	// restart, another gateway) is rendered without one.
	KeepRecall              bool
	KeepRecallConversations int
	// KeepRecallResent is KeepRecall for a client that resends its
	// history (a full-history chat): each resent user turn is rendered
	// with the recalled block it was sent with. When the resent turns and
	// their blocks outgrow the recent turns' window, blocks leave before
	// turns, oldest first and several at once (recentWindow). A chat's
	// first request, which carries no history, keeps its block for its
	// continuation: in the conversation it names, or, landing in the
	// user's default conversation, in the one its continuation derives
	// (memory.Candidate) and that one's branches (keepBlock).
	KeepRecallResent bool
	// HoldSummary shows a new-only client's conversation the summary its
	// previous stored turn was shown, with every turn after it, until
	// those turns no longer fit the recent turns' window (or are no
	// longer all loaded), except on a turn whose free room recall fills
	// (FillRecall, FillWhen): then the newest summary. A new summary version
	// then changes the prompt's stable block once per window, not once
	// per compaction. The summaries are held in this process, for
	// HoldSummaryConversations conversations (default 4096); after a
	// restart, or on another gateway, the newest summary is shown.
	HoldSummary              bool
	HoldSummaryConversations int
}

// Position is where memory goes in a prompt.
type Position string

// The positions of memory.
const (
	// PositionSystem sends memory as system messages: the stable block
	// after the client's system messages, the recalled block before the
	// current turn (each dialect renders them in its API's form).
	PositionSystem Position = "system"
	// PositionUser sends both blocks, at the same places, as user-role
	// messages: no stored text is ever in system role.
	PositionUser Position = "user"
)

// role is the chat role of a memory block at p.
func (p Position) role() string {
	if p == PositionUser {
		return "user"
	}
	return "system"
}

// Assembler prepares upstream requests. It is safe for concurrent use.
type Assembler struct {
	deps Deps
	opts Options
	tmpl *template.Template
	// q quotes stored text for tmpl's blocks.
	q quoter
	// defaultTmpl reports whether tmpl is DefaultTemplate, which
	// renderDefault writes without the template engine.
	defaultTmpl bool
	logger      *slog.Logger
	m           *loadMetrics
	// kept holds the recalled blocks past turns were sent with
	// (Options.KeepRecall); nil without it.
	kept *keptBlocks
	// held holds the summary each conversation was last shown
	// (Options.HoldSummary); nil without it.
	held *heldSummaries
}

// Forget drops what a keeps of the user's conversations (the recalled
// blocks their turns were sent with, the summaries they were shown): the
// user was erased, or one of their conversations deleted. A request whose
// parts loaded before keeps nothing of them (cache.Forgetter).
func (a *Assembler) Forget(tenant, user string) {
	if a.kept != nil {
		a.kept.forget(tenant, user)
	}
	if a.held != nil {
		a.held.forget(tenant, user)
	}
}

// Clear drops what a keeps of every user (erasures may have been missed).
func (a *Assembler) Clear() {
	if a.kept != nil {
		a.kept.clear()
	}
	if a.held != nil {
		a.held.clear()
	}
}

// epochs returns the kept blocks' and the held summaries' counts of
// forgets (0 for either a does not keep), read before a request's parts
// load.
func (a *Assembler) epochs() (kept, held uint64) {
	if a.kept != nil {
		kept = a.kept.epoch()
	}
	if a.held != nil {
		held = a.held.epoch()
	}
	return kept, held
}

// New returns an Assembler that only puts stored history back (no summary,
// facts or recall), within the model's window. counter may be nil (token
// counts are then 0 and nothing is trimmed), and logger may be nil.
func New(history HistoryReader, counter TokenCounter, opts Options, logger *slog.Logger) *Assembler {
	if counter == nil {
		counter = zeroCounter{}
	}
	a, err := NewAssembler(Deps{History: history, Counter: counter}, Options{
		RecentMessages: opts.RecentMessages, MaxContextTokens: opts.MaxContextTokens,
		CompletionReserve: opts.CompletionReserve, Now: opts.Now,
	}, logger)
	if err != nil {
		panic(err) // unreachable: the default template parses
	}
	return a
}

// NewAssembler returns an Assembler. It fails when the template does not
// parse or does not enclose each block in a tag pair (checkDelimiters),
// the shares are out of range, or History or Counter is missing.
func NewAssembler(deps Deps, opts Options, logger *slog.Logger) (*Assembler, error) {
	if deps.History == nil || deps.Counter == nil {
		return nil, fmt.Errorf("prompt: history and counter are required: %w", memory.ErrInvalid)
	}
	sh := opts.Shares
	if sh.Summary < 0 || sh.ExtractiveSummary < 0 || sh.Pinned < 0 || sh.Facts < 0 || sh.Recall < 0 || sh.StatementRecall < 0 || sh.total() > 1 {
		return nil, fmt.Errorf("prompt: shares %+v must be non-negative and sum to at most 1: %w", sh, memory.ErrInvalid)
	}
	src := opts.Template
	if src == "" {
		src = DefaultTemplate
	}
	tmpl, err := template.New("memory").Option("missingkey=error").Parse(src)
	if err != nil {
		return nil, fmt.Errorf("prompt: memory template: %w", err)
	}
	names, err := checkDelimiters(src, tmpl)
	if err != nil {
		return nil, err
	}
	switch opts.FillWhen {
	case "":
		opts.FillWhen = FillAlways
	case FillAlways, FillAsked:
	default:
		return nil, fmt.Errorf("prompt: recall fill %q must be always or asked: %w", opts.FillWhen, memory.ErrInvalid)
	}
	switch opts.Position {
	case "":
		opts.Position = PositionSystem
	case PositionSystem, PositionUser:
	default:
		return nil, fmt.Errorf("prompt: memory position %q must be system or user: %w", opts.Position, memory.ErrInvalid)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	a := &Assembler{deps: deps, opts: opts, tmpl: tmpl, q: quoter{names: names}, defaultTmpl: src == DefaultTemplate, logger: logger, m: newLoadMetrics()}
	if opts.KeepRecall || opts.KeepRecallResent {
		n := opts.KeepRecallConversations
		if n <= 0 {
			n = 4096
		}
		a.kept = newKeptBlocks(n, max(opts.RecentMessages, 64))
	}
	if opts.HoldSummary {
		n := opts.HoldSummaryConversations
		if n <= 0 {
			n = 4096
		}
		a.held = newHeldSummaries(n)
	}
	return a, nil
}

// Budget returns the token budget for req: the smaller of MaxContextTokens
// (when set) and the model's context window minus the completion reserve
// (req.MaxTokens, else CompletionReserve), lowered — never raised — by
// req.Budget. It is never negative.
func (a *Assembler) Budget(req memory.Request) int {
	reserve := req.MaxTokens
	if reserve <= 0 {
		reserve = a.opts.CompletionReserve
	}
	b := a.deps.Counter.ContextWindow(req.Model) - reserve
	if a.opts.MaxContextTokens > 0 {
		b = min(b, a.opts.MaxContextTokens)
	}
	if req.Budget > 0 {
		b = min(b, req.Budget)
	}
	return max(b, 0)
}

// passageBudget is what recall is told the passages may fill for req: the
// summary's, facts' and recall's shares of Budget(req), which is what
// packing gives them (the shares the summary and facts leave unused go to
// the passages) unless every recent turn fits with room to spare. Asking
// recall for passages enough to fill the whole budget cost a third more
// recall work on every request of a long conversation, and the default
// configuration's evaluation (make eval, 8000 tokens) scored the same
// with 24 % fewer prompt tokens.
func (a *Assembler) passageBudget(req memory.Request) int {
	sh := a.opts.Shares
	return int(math.Round(float64(a.Budget(req)) * min(sh.total(), 1)))
}

// Prepare returns the messages to send upstream for req, within Budget(req).
//
// The result is, in order, from what changes least to what changes per
// question (so a provider's prompt cache serves as much as it can): the
// client's system and developer messages (untouched, first), the stable
// memory block (pinned facts, the rolling summary, facts about the user),
// the recent turns (a window that moves in steps: recentWindow), the
// recalled block (the passages this question recalled), and the current
// turn (from the newest user message on). The blocks are rendered from the
// template with stored text quoted (quoteText), each part within its share,
// as system messages or, with PositionUser, user messages; Prepared.Blocks
// locates them. A client that sent only its
// newest turn gets the conversation's stored messages after the summary as
// recent turns (none with req.NoRecent: the provider holds them); a client
// that sent its own history keeps as much of it as fits, newest first, and
// gets the stored summary for the overflow.
//
// Prepare never drops a system message or the current turn and never splits
// an assistant message with tool calls from the tool messages answering it.
// When those alone exceed the budget they are forwarded without memory and
// OverBudget is set. A request whose mode does not inject, or that names no
// user, gets its messages back unchanged. A failure to load memory is
// returned wrapped, and the caller forwards the request without memory.
func (a *Assembler) Prepare(ctx context.Context, req memory.Request) (memory.Prepared, error) {
	system, rest := splitSystem(req.Messages)
	if !req.Mode.Injects() || req.User == "" {
		raws := memory.Raws(req.Messages)
		// Counter.Messages of raws, from what ParseMessage read of them.
		c := a.counter(req.Tenant, req.User)
		n := c.Messages(req.Model, nil)
		for _, m := range req.Messages {
			if len(m.Raw) > 0 {
				n += c.Message(req.Model, m)
			} else {
				n += c.RawMessage(req.Model, m.Raw)
			}
		}
		return memory.Prepared{Messages: raws, TokensOriginal: n, TokensSent: n}, nil
	}
	// A tool loop's assistant call and results continue the current turn:
	// only turns before it make a client's own history.
	earlier, _ := memory.SplitCurrent(rest)
	fullHistory := len(earlier) > 0
	ld, err := a.load(ctx, req, rest, fullHistory)
	if err != nil {
		return memory.Prepared{}, err
	}
	if len(ld.degraded) > 0 {
		a.logger.WarnContext(ctx, "memory parts left out", "conversation", req.Conversation,
			"degraded", ld.degraded, "error", errors.Join(ld.errs...))
	}
	_, span := telemetry.Start(ctx, "memory.assemble")
	p, err := a.assembleHeld(ctx, req, system, rest, fullHistory, ld)
	telemetry.End(span, err)
	if err != nil {
		return memory.Prepared{}, err
	}
	if err := ctx.Err(); err != nil {
		// Abandoned: the counts after ctx ended were bounds, not counts.
		return memory.Prepared{}, fmt.Errorf("prepare: %w", err)
	}
	p.Degraded = ld.degraded
	a.logger.DebugContext(ctx, "prompt assembled", "conversation", req.Conversation,
		"budget", p.Budget, "tokens_sent", p.TokensSent, "tokens_original", p.TokensOriginal,
		"over_budget", p.OverBudget, "parts", p.Parts, "summary_edited", ld.summaryEdited, "unsaid", len(ld.unsaid))
	return p, nil
}

// splitSystem splits msgs into the system (and developer) messages and the
// others, each in order. When the system messages all lead, as they
// usually do, both are msgs' own slices: a client's long history is not
// copied.
func splitSystem(msgs []memory.Message) (system, rest []memory.Message) {
	lead := 0
	for lead < len(msgs) && memory.IsSystem(msgs[lead].Role) {
		lead++
	}
	tail := msgs[lead:]
	if !slices.ContainsFunc(tail, func(m memory.Message) bool { return memory.IsSystem(m.Role) }) {
		return msgs[:lead:lead], slices.Clip(tail)
	}
	for _, m := range msgs {
		if memory.IsSystem(m.Role) {
			system = append(system, m)
			continue
		}
		rest = append(rest, m)
	}
	return system, rest
}

// zeroCounter counts nothing: the Assembler of New without a counter.
type zeroCounter struct{}

func (zeroCounter) Messages(string, []json.RawMessage) int { return 0 }
func (zeroCounter) RawMessage(string, json.RawMessage) int { return 0 }
func (zeroCounter) Message(string, memory.Message) int     { return 0 }
func (zeroCounter) Text(string, string) int                { return 0 }
func (zeroCounter) SystemMessage(string, string) int       { return 0 }
func (zeroCounter) ContextWindow(string) int               { return 1 << 30 }
