// Package memory holds memgate's domain vocabulary: who a request belongs to,
// the messages of a conversation, the exchanges captured from the upstream,
// and the errors callers act on. It imports only the standard library; every
// other package speaks in its terms.
package memory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors that callers check with errors.Is. Only internal/proxy turns
// them into HTTP statuses.
var (
	// ErrNotFound reports that the addressed conversation, user or fact does not exist
	// (within the caller's tenant).
	ErrNotFound = errors.New("not found")
	// ErrInvalid reports input that breaks a documented rule.
	ErrInvalid = errors.New("invalid input")
	// ErrConflict reports a write that lost a race (a summary version that
	// exists already).
	ErrConflict = errors.New("conflict")
	// ErrUnavailable reports that a memory backend could not be reached.
	ErrUnavailable = errors.New("memory backend unavailable")
	// ErrLockLost reports a write the store refused because it was made
	// under a chat's lock (ChatOf) that its holder no longer holds: the
	// lock ran out unrenewed (its process stalled) and another holder may
	// have taken it. Nothing of the write is stored; its writer takes the
	// lock again and redoes what it did under it.
	ErrLockLost = errors.New("chat lock lost")
	// ErrSchemaTooNew reports a store whose database a newer build of
	// memgate migrated: it records a migration this build does not know,
	// so this build refuses to use it rather than ignore what the newer
	// schema relies on.
	ErrSchemaTooNew = errors.New("database schema newer than this build")
)

// DefaultTenant is the tenant of requests that name none when no gateway keys
// are configured.
const DefaultTenant = "default"

// IDChars describes a well-formed id, for error messages.
const IDChars = "1-128 characters of [A-Za-z0-9._:@+-]"

// ValidID reports whether s is a well-formed id: 1–128 characters of
// [A-Za-z0-9._:@+-] (an e-mail address with a plus tag is one). It is the
// contract for tenant, user and conversation ids, checked on every
// request.
func ValidID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			continue
		}
		switch c {
		case '.', '_', ':', '@', '+', '-':
			continue
		}
		return false
	}
	return true
}

// BodyUserID returns the memory user a request body's user value names
// (Chat Completions' and Responses' user or safety_identifier, Anthropic's
// metadata.user_id): the value itself when it is an id (ValidID), "" when
// it is empty or blank (only white space: an app that sends " " for each
// anonymous user must not give them all one memory), and otherwise "u-"
// and the first 32 hex digits of the value's SHA-256 — a valid id, the
// same for the same value on every request and gateway, distinct for
// distinct values (up to a 128-bit collision). Apps put names ("John
// Smith"), braced UUIDs or hashes with '/' and '=' there; refusing them
// would break the app, and ignoring them would put every such user in one
// memory (none at all). The value is compared byte for byte: "Ann" and
// "ann " are two users.
//
// The digests' form is reserved: a body value that has it (IsDigestUser)
// is digested too, so it names a user of its own. A body's user is often
// what an end user chose (a username); one who chose the digest of
// another's name ("u-" and the hex of sha256("José")) must not read that
// user's memory. The management API and X-Memory-User, which the app or
// operator sets, name a digest user by its id.
func BodyUserID(v string) string {
	if ValidID(v) && !IsDigestUser(v) {
		return v
	}
	if strings.TrimSpace(v) == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(v))
	return "u-" + hex.EncodeToString(sum[:16])
}

// NamedUserID returns the user an operator's value names (the management
// API, the inspector's search): an id names itself, a digest's included —
// the user the inspector shows —, any other value the user it names as a
// body's value (BodyUserID).
func NamedUserID(v string) string {
	if ValidID(v) {
		return v
	}
	return BodyUserID(v)
}

// IsDigestUser reports whether id has the form of a body user value's
// digest (BodyUserID): "u-" and 32 lower-case hex digits.
func IsDigestUser(id string) bool {
	rest, ok := strings.CutPrefix(id, "u-")
	if !ok || len(rest) != 32 {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if c := rest[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Identity names whose memory a request reads and writes.
type Identity struct {
	Tenant       string
	User         string
	Conversation string
}

// Mode is the per-request memory mode chosen by the X-Memory-Mode header.
type Mode string

// The memory modes.
const (
	ModeOn    Mode = "on"    // inject memory and store the exchange
	ModeOff   Mode = "off"   // plain proxy
	ModeRead  Mode = "read"  // inject memory, store nothing
	ModeWrite Mode = "write" // store the exchange, inject nothing
)

// ParseMode returns the Mode named by s ("" means ModeOn).
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case "":
		return ModeOn, nil
	case ModeOn, ModeOff, ModeRead, ModeWrite:
		return Mode(s), nil
	}
	return "", ErrInvalid
}

// Injects reports whether memory is added to the upstream request in mode m.
func (m Mode) Injects() bool { return m == ModeOn || m == ModeRead }

// Stores reports whether the exchange is captured in mode m.
func (m Mode) Stores() bool { return m == ModeOn || m == ModeWrite }

// Conversation is one thread of messages between a user and the model.
type Conversation struct {
	Tenant       string    `json:"tenant"`
	User         string    `json:"user"`
	ID           string    `json:"id"`
	MessageCount int       `json:"message_count"`
	CreatedAt    time.Time `json:"created_at"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// Message is one stored chat message. Raw holds the OpenAI message object
// exactly as it was exchanged (tool calls, content parts, name); Content is
// its text, for display, search and the token counting of a message
// without Raw. A message from ParseMessage also keeps what it read of Raw
// (Decoded), so no later step decodes Raw again.
type Message struct {
	Tenant       string `json:"-"`
	User         string `json:"-"`
	Conversation string `json:"conversation"`
	// Seq orders the messages of a conversation, starting at 1.
	Seq int64 `json:"seq"`
	// Key is the deterministic idempotency key: the same captured message
	// always has the same key, so redelivery never stores it twice.
	Key       string          `json:"key"`
	Role      string          `json:"role"`
	Content   string          `json:"content"`
	Raw       json.RawMessage `json:"raw"`
	Tokens    int             `json:"tokens"`
	CreatedAt time.Time       `json:"created_at"`

	// parsed is what ParseMessage read of Raw (see Decoded).
	parsed *Parsed
}

// Usage is the token usage the upstream reported for an exchange.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// CachedTokens are the prompt tokens the provider read from its prompt
	// cache (part of PromptTokens), when it said.
	CachedTokens int `json:"cached_tokens,omitempty"`
}

// UnmarshalJSON reads a Usage, and OpenAI's
// prompt_tokens_details.cached_tokens as CachedTokens. A provider's usage is
// reported, not relied on: a count that is not a whole number from 0 to
// MaxTokenCount reads as 0 (TokenCount), and a usage that is not an object
// reads as zero, rather than failing the reply it came with.
func (u *Usage) UnmarshalJSON(b []byte) error {
	var v struct {
		Prompt     TokenCount `json:"prompt_tokens"`
		Completion TokenCount `json:"completion_tokens"`
		Total      TokenCount `json:"total_tokens"`
		Cached     TokenCount `json:"cached_tokens"`
		Details    *struct {
			Cached TokenCount `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	}
	*u = Usage{}
	if json.Unmarshal(b, &v) != nil {
		return nil
	}
	*u = Usage{PromptTokens: int(v.Prompt), CompletionTokens: int(v.Completion), TotalTokens: int(v.Total), CachedTokens: int(v.Cached)}
	if u.CachedTokens == 0 && v.Details != nil {
		u.CachedTokens = int(v.Details.Cached)
	}
	return nil
}

// MaxTokenCount is the largest token count a provider's usage is read as.
const MaxTokenCount = math.MaxInt32

// TokenCount is a token count of a provider's usage, read leniently: a JSON
// value that is not a whole number from 0 to MaxTokenCount (negative,
// fractional, in exponent form, too big, a string) reads as 0 and never
// fails the decoding of the reply around it.
type TokenCount int

// UnmarshalJSON implements json.Unmarshaler.
func (c *TokenCount) UnmarshalJSON(b []byte) error {
	*c = 0
	if n, err := strconv.ParseInt(string(b), 10, 64); err == nil && n >= 0 && n <= MaxTokenCount {
		*c = TokenCount(n)
	}
	return nil
}

// Exchange is one request/reply pair handed to capture. Prior and Turn are
// the client's non-system messages divided by SplitAnswered: Prior runs
// through its last assistant message (empty for clients that send only new
// messages), Turn holds the user or tool messages the reply answers; Reply
// is the assistant message, reassembled when streamed.
type Exchange struct {
	// ID identifies the exchange; message keys derive from it. Capture mints
	// it (random, so unique within any tenant, user and conversation); a
	// client's request id never decides it.
	ID string `json:"id"`
	// RequestID is the request id the exchange was served under (the
	// client's X-Request-Id or the gateway's), for logs only.
	RequestID string `json:"request_id,omitempty"`
	Identity
	Model string    `json:"model"`
	Prior []Message `json:"prior,omitempty"`
	Turn  []Message `json:"turn"`
	Reply Message   `json:"reply"`
	// Partial is set when Reply goes on with the assistant message the
	// request's history ended with (Prefilled: a "continue", a prefill):
	// that message, which Prior then leaves out and Reply, joined with
	// it, replaces. Adoption matches the history with it (Prior and
	// Partial), so a continue of a chat's first reply adopts that chat's
	// own first turn, never another chat's that opened alike.
	Partial *Message  `json:"partial,omitempty"`
	Usage   *Usage    `json:"usage,omitempty"`
	At      time.Time `json:"at"`
	// Received is when the gateway received the exchange's request, by its
	// own clock, before it read memory for it (Import: when the import
	// began). A store drops an exchange received at or before its
	// conversation was last deleted (SaveResult.Dropped): a turn in flight
	// during the deletion read what was deleted, and its reply may repeat
	// it. Zero (an exchange made elsewhere, or queued by a version that
	// did not set it): no deletion drops it; the engine purges such
	// exchanges said before the deletion from the queues when it deletes.
	Received time.Time `json:"received,omitzero"`
	// Candidate is set on an exchange stored in the user's
	// DefaultConversation by a request that named no conversation and
	// resent no earlier turn: the conversation a full-history continuation
	// of it would derive (DerivedConversation). Such a continuation adopts
	// the exchange (see Adopter).
	Candidate string `json:"candidate,omitempty"`
	// Derived is true when Conversation was derived from a resent history
	// (DerivedConversation, or the LegacyConversation an earlier memgate
	// stored the chat in, or a branch of either: Routed) because the
	// request named none.
	Derived bool `json:"derived,omitempty"`
	// Root is set, with Derived, on an exchange whose request was routed
	// from its DerivedConversation (or LegacyConversation) to a branch of
	// it (BranchOf) because its resent history parts from what that one
	// holds: the conversation it was routed from (Routed.Root), the
	// Candidate its chat's first turn was recorded with, so the branch
	// adopts that turn (see Adopter).
	Root string `json:"root,omitempty"`
	// BranchSeed is set, with Derived, to the seed of the branches the
	// request was routed through (Routed.Seed: the BranchSeed of its
	// messages, or their LegacyBranchSeed in a chat an earlier memgate
	// stored). It guards the chats that share a derived conversation
	// against each other: the save is refused (SaveResult.Parted) when the
	// conversation's live history parts from Prior and Turn (Parts) — say
	// another chat that opened alike stored its turns there while this
	// request was in flight — and the write path stores the exchange in
	// the branch its history continues (BranchOf) instead. Empty: the save
	// aligns the history as in a named conversation (an exchange queued
	// before the guard, or one in the deepest branch a chat may take,
	// where an edit supersedes).
	BranchSeed string `json:"branch_seed,omitempty"`
	// Skipped is how many messages of the client's resent history Prior
	// leaves out, after its first BranchHead (CutHistory): Prior then
	// holds the history's first BranchHead messages and its newest. Zero:
	// Prior is the whole history.
	Skipped int `json:"skipped,omitempty"`
	// TurnSkipped is how many messages of the client's turn Turn leaves
	// out, after its first BranchHead (CutHistory, as Skipped of Prior):
	// a turn of tens of thousands of messages, no reply among them. The
	// messages stored after them get no Stamp. Zero: Turn is the whole
	// turn.
	TurnSkipped int `json:"turn_skipped,omitempty"`
	// Gap is the Digest of the messages Skipped leaves out (of their
	// leaves at their positions, each as memgate stores it, sanitized and
	// redacted: a digest at rest never sums a secret the store does not
	// keep), when the Capturer checked them
	// against the conversation (Resent); nil: unknown, and the messages
	// stored after them get no Stamp.
	Gap *Digest `json:"gap,omitempty"`
	// Rewind is set when the client changed a message among those
	// Skipped leaves out that the conversation stored before (see Rewind).
	Rewind *Rewind `json:"rewind,omitempty"`
	// Edits are set when the client changed messages among those Skipped
	// leaves out, each on its own, the messages after them unchanged (see
	// Edit): the save supersedes the stored copies only, and amends the
	// Stamps after them, instead of rewinding.
	Edits []Edit `json:"edits,omitempty"`
	// Resent is the request's whole history, for the Capturer's check of
	// what Skipped leaves out (Gap, Rewind); in memory only, never queued.
	Resent Resent `json:"-"`
	// TraceParent is the W3C traceparent of the traced request that caused
	// the exchange ("" untraced): it travels through the capture and
	// enrichment queues so the enrichment's span links back to the request.
	TraceParent string `json:"trace_parent,omitempty"`
	// Fence names the hold of the chat lock (ChatOf) the exchange is
	// stored under, as the store's LockChats returned it: the store
	// commits the save only while that hold still holds the lock, else
	// refuses it with ErrLockLost. Zero: not checked (an exchange of no
	// chat, or a writer without the store's locks; record's capture,
	// given them, never stores a chat's turn without them). It never
	// leaves the process (not encoded).
	Fence Fence `json:"-"`
}

// Fence names one hold of chat locks (ChatOf) on one store handle: a
// store's LockChats returns it, and a write under the locks carries it
// (Exchange.Fence) so that the store commits the write, in its own
// transaction, only while that very hold still holds them — not another
// hold of the same chat, taken since on the same handle or elsewhere
// (ErrLockLost). Each hold gets a new one. The zero Fence names none.
type Fence uint64

// ChatOf returns the chat whose first turn storing ex may store or find,
// the chat whose lock covers its storing: a first turn's Candidate
// conversation, or the derived conversation (Root, else Conversation) a
// Derived exchange resending history continues. It returns false for any
// other exchange.
func ChatOf(ex Exchange) (Identity, bool) {
	id := ex.Identity
	switch {
	case ex.Candidate != "":
		id.Conversation = ex.Candidate
	case ex.Derived && len(ex.Prior) > 0:
		if ex.Root != "" {
			id.Conversation = ex.Root
		}
	default:
		return Identity{}, false
	}
	return id, true
}

// SaveResult reports what storing an exchange changed.
type SaveResult struct {
	// Inserted is the number of new messages stored.
	Inserted int
	// Stored are those messages as stored, in Seq order, each as the
	// store's Recent would return it (identity, Seq, Key, Role, Content,
	// Raw, Tokens, CreatedAt at the store's precision): a cache of the
	// conversation's newest turns can append them instead of reading the
	// window again.
	Stored []Message
	// Revised are the new texts of messages the client edited where its
	// requests no longer store them (Exchange.Edits), each stored as stored
	// at the edited message's Seq (its old text moved to a superseded
	// row), in Seq order; not counted in Inserted, nor part of Stored (they
	// are not the conversation's newest).
	Revised []Message
	// Superseded is the number of stored messages moved off the live branch
	// because the client edited or regenerated an earlier turn.
	Superseded int
	// TailBefore is the user's Revisions.Tail just before the exchange's
	// messages were inserted, read in the store's write transaction, when
	// TailKnown: nothing else changed the user's messages between that
	// count and the insert. A cache holding a conversation's newest turns
	// at that count appends Stored to them (see internal/engine/cache). A
	// store that cannot read the count there leaves TailKnown false.
	TailBefore int64
	TailKnown  bool
	// Duplicate is true when the exchange had been stored before.
	Duplicate bool
	// Dropped is true when the user was erased after the exchange happened,
	// or its conversation deleted after the exchange was received.
	Dropped bool
	// Parted is true when the exchange was not stored because its
	// conversation's live history parts from the history it resends
	// (Exchange.BranchSeed): nothing changed, and the exchange belongs in
	// a branch.
	Parted bool
	// GuardSince is not set by stores: the write path sets it on the results
	// it hands the after-save hooks, to the earliest At among the exchanges
	// of this exchange's user in the batch (now for one without At). Every
	// fact, summary and item the hooks write deriving from the exchange
	// carries it as its own GuardSince (see Fact.GuardSince), so a store
	// refuses it when the user was erased since.
	GuardSince time.Time
}

// Delivery is one entry claimed from a durable queue.
type Delivery struct {
	// ID is the queue's id for the entry, used to acknowledge it.
	ID string
	// Payload is the bytes that were enqueued.
	Payload []byte
	// Attempts counts deliveries of this entry, this one included.
	Attempts int
}

// Request is what the proxy hands the memory layer for one chat completion:
// who is asking, how, and the client's messages exactly as sent.
type Request struct {
	Identity
	Mode Mode
	// Model is the request's model, for token counting.
	Model string
	// Messages are the client's messages, each read once by ParseMessage
	// where the request was parsed: Raw is the message as the client sent
	// it, Role and Content what every later step reads.
	Messages []Message
	// MaxTokens is the request's max_tokens or max_completion_tokens (0 if absent).
	MaxTokens int
	// Budget is the X-Memory-Budget header (0 if absent).
	Budget int
	// CrossConversation is false when X-Memory-Cross: off.
	CrossConversation bool
	// NoRecent is true when the provider holds the conversation's history
	// (a Responses API request with previous_response_id): memory (pinned
	// facts, summary, facts, recall) is injected, stored recent turns are
	// neither loaded nor sent.
	NoRecent bool
	// NewChat is true when the request, landed in the user's
	// DefaultConversation without earlier turns, is a new chat's first
	// turn: its user's app has been seen resending its history (the
	// proxy learns it per user). The default conversation's stored turns,
	// summary and kept blocks are then neither loaded nor sent; what any
	// new chat gets (pinned facts, facts, recall) is.
	NewChat bool
	// AskNewChat, when set and NewChat is false, asks what the proxy
	// could not tell on its own (the user not seen resending by its
	// process): whether another gateway process saw the user resend
	// their history (the signal they share, one read), the request then
	// being a new chat's first turn after all. Prepare asks it beside its
	// loads, only when it loads the conversation's stored turns or
	// summary, and leaves them out when it answers true; an error, or no
	// answer by the loads' deadline, leaves the request a turn of the
	// conversation (Prepared.Degraded names DegradedNewChat).
	AskNewChat func(ctx context.Context) (bool, error)
	// NoTools is true when the request declares no tools (Chat Completions:
	// no tools nor functions; Anthropic Messages: no tools; Responses: no
	// tools nor a stored prompt, which may carry tools).
	// Stored turns are then replayed without their tool calls and tool
	// results (an assistant message keeps its text): some upstreams (AWS
	// Bedrock, Anthropic at times) reject tool-use blocks in a request
	// without tools. The client's own messages are never altered.
	NoTools bool
	// BlocksInPlace is true when the request's API renders every memory
	// block of Prepared where it stands among the messages (Chat
	// Completions; Anthropic Messages among a client's resent messages).
	// Without it the recalled blocks are all moved before the current
	// turn (Responses), so a past turn's block cannot stay in place and
	// none is kept.
	BlocksInPlace bool
	// ResentInPlace is true when the request's API puts a memory block
	// back in the user turn it was sent with once the client resends that
	// turn (Chat Completions, Anthropic Messages, Responses when the
	// client holds the history): a block sent with this request's
	// question can stay in place on the chat's next request, even when
	// this request resends no history (BlocksInPlace false).
	ResentInPlace bool
	// ReplaysThinking is true when the request's API takes a stored
	// reply's signed reasoning back (Anthropic Messages with extended
	// thinking on, which requires the assistant turn whose tool calls the
	// request's tool results answer to start with its thinking blocks):
	// the replayed assistant turns of the tool loop the request continues
	// keep the signed blocks stored with them (their thinking_blocks
	// member). Otherwise no stored reasoning goes upstream but a tool
	// loop's signed or encrypted reasoning_details (OpenRouter), which
	// any request continuing that loop gets back.
	ReplaysThinking bool
	// Root is the conversation derived from the request's history
	// (DerivedConversation) when routing placed the request in a
	// branch of it (BranchOf), else "": the chat's first turn,
	// answered before the branch existed, kept its recalled block there.
	Root string
	// At is when the newest turn was said (X-Memory-Timestamp, else the
	// request's arrival); zero means now. Recall reads a question's time
	// words ("last week") relative to it.
	At time.Time
	// Revisions are the user's revision counters as this request read them
	// already, routing it (see internal/engine's Route), once the turns
	// before it were stored; nil: Prepare reads them. They are the
	// request's alone: a later request reads its own, so what other
	// gateways wrote in between is never missed.
	Revisions *Revisions
}

// Prepared is the memory layer's answer: the messages to forward upstream and
// the accounting the proxy reports in response headers.
type Prepared struct {
	// Messages replace the request's messages upstream, each exactly one
	// JSON value.
	Messages []json.RawMessage
	// TokensOriginal is what the client's request plus stored history would cost.
	TokensOriginal int
	// TokensSent is what Messages cost.
	TokensSent int
	// OverBudget is true when the parts that are never dropped alone exceed the budget.
	OverBudget bool
	// Budget is the token budget the messages were assembled within (0 when
	// none was applied).
	Budget int
	// Degraded names the memory parts left out because they failed to load
	// or came too late (see the Degraded* constants), in a stable order;
	// empty when every part loaded.
	Degraded []string
	// Parts break TokensSent down by part of the prompt: "system", "memory"
	// (the whole memory block, of which "pinned", "summary", "facts" and
	// "recall" are the sections' text), "recent" and "current"; TokensSent is
	// system + memory + recent + current + the reply priming.
	Parts map[string]int
	// Blocks locate the memory messages memgate added among Messages, in
	// order (none when no memory was added). A dialect adapter renders them
	// where its API wants memory; without Blocks, every system message that
	// is not the client's own is taken for one stable block.
	Blocks []Block
}

// Block is one memory message of a Prepared prompt.
type Block struct {
	// At is the message's index in Prepared.Messages.
	At int
	// Stable is true for the memory that changes rarely (pinned facts, the
	// summary, facts about the user), which follows the client's system
	// messages; false for what this request recalled, which comes right
	// before the current turn.
	Stable bool
	// Text is the block's text, delimiters included.
	Text string
}

// CandidateOf returns the chat conversation a save of ex that res reports
// records ex with (see Exchange.Candidate), in the save's transaction: a
// first turn's Candidate, or the Root of a branch ex started (its first
// message stored at Seq 1) while its chat's first turn was not stored yet,
// so that this turn finds itself stored there when it comes. "" when
// there is none, or res stored nothing (Dropped, Parted).
func CandidateOf(ex Exchange, res SaveResult) string {
	switch {
	case res.Dropped || res.Parted:
		return ""
	case ex.Candidate != "":
		return ex.Candidate
	case ex.Root != "" && len(ex.Prior) > 0 && len(res.Stored) > 0 && res.Stored[0].Seq == 1:
		return ex.Root
	}
	return ""
}
