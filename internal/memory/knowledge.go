package memory

import (
	"strings"
	"time"
)

// FactType classifies what a fact says about a user.
type FactType string

// The fact types.
const (
	FactProfile      FactType = "profile"
	FactPreference   FactType = "preference"
	FactGoal         FactType = "goal"
	FactLimit        FactType = "limit"
	FactDecision     FactType = "decision"
	FactRelationship FactType = "relationship"
	FactEvent        FactType = "event"
)

// Valid reports whether t is one of the fact types.
func (t FactType) Valid() bool {
	switch t {
	case FactProfile, FactPreference, FactGoal, FactLimit, FactDecision, FactRelationship, FactEvent:
		return true
	}
	return false
}

// Fact is something a user stated about themselves: a goal, a limit, a
// preference, a decision. Facts are kept per (tenant, user, type, key); a
// contradicting value supersedes the old one, which keeps the time it stopped
// being true.
type Fact struct {
	ID     int64    `json:"id"`
	Tenant string   `json:"-"`
	User   string   `json:"user"`
	Type   FactType `json:"type"`
	// Key is the normalised subject ("city", "savings_goal").
	Key   string `json:"key"`
	Value string `json:"value"`
	// Confidence is in [0, 1].
	Confidence float64 `json:"confidence"`
	// Mentions counts how often the fact was stated.
	Mentions int `json:"mentions"`
	// Pinned facts are always injected and never compressed away.
	Pinned bool `json:"pinned"`
	// Conversation is where the fact was last stated ("" when added by the API).
	Conversation string `json:"conversation,omitempty"`
	// Rule names the rule that pinned the fact when it was last stated
	// ("goal", "diet"…; "" when no rule did: a model's extraction, the API).
	Rule string `json:"rule,omitempty"`
	// Source is the key of the message of Conversation the fact was last
	// stated in ("" when unknown). It is a reference, never a copy: the
	// message's text stays in the conversation, and goes with it.
	Source       string     `json:"source,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	SupersededAt *time.Time `json:"superseded_at,omitempty"`
	ExpiresAt    *time.Time `json:"expires_at,omitempty"`
	// GuardSince, set on a write derived from captured exchanges (the
	// after-save hooks' facts, summaries and items), is when those were
	// captured: the earliest At among the exchanges of the user that the
	// write path handed the hooks (SaveResult.GuardSince). A store refuses
	// the write (UpsertFact returns ErrErased) when the user was erased at or after it, checking in
	// the write's own transaction, against an erasure that commits
	// concurrently too, and, of a fact of a conversation, unless its
	// Source is a live message of Conversation: a guarded fact naming no
	// message is refused, since nothing tells which conversation of the
	// name (one deleted, one started again since) it was made from. So
	// derived data of captured turns never outlives an erasure or lands
	// in a conversation other than its own, whatever the order of events.
	// Zero (a write made now: the management API) is not checked. It is
	// never stored: what a store returns has it zero.
	GuardSince time.Time `json:"-"`
	// Covers, on a guarded write, are the keys of the messages of
	// Conversation the fact may have been stated in besides Source (fact
	// extraction asks about several turns at once): UpsertFact refuses it
	// with ErrConflict unless every one is live there, so the words of a
	// turn deleted since never come back stated in a newer one. Never
	// stored.
	Covers []string `json:"-"`
}

// Current reports whether the fact is true at now: not superseded, not expired.
func (f Fact) Current(now time.Time) bool {
	return f.SupersededAt == nil && (f.ExpiresAt == nil || now.Before(*f.ExpiresAt))
}

// Summary is one version of a conversation's rolling summary, covering the
// messages with Seq in [FromSeq, ToSeq].
type Summary struct {
	Tenant       string    `json:"-"`
	User         string    `json:"-"`
	Conversation string    `json:"conversation"`
	Version      int       `json:"version"`
	FromSeq      int64     `json:"from_seq"`
	ToSeq        int64     `json:"to_seq"`
	Text         string    `json:"text"`
	KeyEvents    []string  `json:"key_events"`
	Preserved    Preserved `json:"preserved"`
	Tokens       int       `json:"tokens"`
	// CoveredTokens is what the messages this summary and its predecessors
	// replaced would cost verbatim, for the tokens-saved accounting.
	CoveredTokens int `json:"covered_tokens"`
	// Summariser is what wrote the version: SummariserModel or
	// SummariserExtractive (sentences picked, no model: the primary without
	// a side-model key, or the fallback); "" for versions stored before it
	// was recorded.
	Summariser string    `json:"summariser,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	// GuardSince guards the write of this summary, as Fact.GuardSince a
	// fact's (SaveSummary returns ErrErased).
	GuardSince time.Time `json:"-"`
	// Through is the key of the last message the version covers, set by
	// the compactor for the write check alone: a guarded write (GuardSince
	// set) is refused (ErrErased) unless that message is live in
	// Conversation, so a late summary of a deleted conversation never
	// lands in one of the same name started again; a guarded write with
	// Through "" is refused. It is never stored: what a store returns has
	// it "".
	Through string `json:"-"`
	// Covers are the keys of the messages the version summarised anew
	// (those its predecessor did not cover), set by the compactor for the
	// write check alone: SaveSummary refuses the version (ErrConflict)
	// unless each is still a live message of Conversation, so a summary of
	// a branch the user replaced while it was written (an edit, a
	// deletion, a regeneration, a Rewind) never lands after the save that
	// dropped the versions covering that branch. Nil: nothing is checked.
	// It is never stored: what a store returns has it nil.
	Covers []string `json:"-"`
}

// Preserved lists the specifics a summary must carry verbatim.
type Preserved struct {
	Numbers   []string `json:"numbers"`
	Dates     []string `json:"dates"`
	Decisions []string `json:"decisions"`
}

// Item is a recallable passage: a turn (or a chunk of a long one), a summary
// or a fact, with its embedding.
type Item struct {
	ID           int64  `json:"id"`
	Tenant       string `json:"-"`
	User         string `json:"user"`
	Conversation string `json:"conversation"`
	// Kind is "message", "summary" or "fact".
	Kind string `json:"kind"`
	// Ref points at the source: a message key, a summary version, a fact id.
	Ref string `json:"ref"`
	// Chunk numbers the pieces of a long source, from 0.
	Chunk int    `json:"chunk"`
	Text  string `json:"text"`
	// Embedding is the item's vector. In items a search returns it may be
	// shared with the store's caches and other searches' results: read it,
	// replace it, never write into it.
	Embedding []float32 `json:"-"`
	Model     string    `json:"model"`
	Dims      int       `json:"dims"`
	CreatedAt time.Time `json:"created_at"`
	// SaidAt is when the source was said: the message's time (capture
	// time for live traffic, or the time a client supplied for imported
	// history), a summary's or fact's time otherwise. Zero when stored
	// means CreatedAt. Recalled passages are dated by it.
	SaidAt time.Time `json:"said_at"`
	// Score is set by searches.
	Score float64 `json:"score,omitempty"`
	// Turns, for a recalled passage (a message hit with the turns around
	// it), are the turns its Text shows, in order (PassageText): nil for
	// any other item.
	Turns []PassageTurn `json:"-"`
	// GuardSince guards the write of this item, as Fact.GuardSince a
	// fact's (AddItems skips the item). A guarded item is also skipped
	// once what it was made from is no longer stored as it was read: its
	// message (Ref, in Conversation), or its summary (Ref
	// "conversation:vN") or fact (Ref its id, last stated in Conversation)
	// with CreatedAt the summary's CreatedAt or the fact's UpdatedAt.
	GuardSince time.Time `json:"-"`
}

// PendingIndex is an entry of a store's index backlog: a message a round
// of indexing, bounded in what it adds to the full-text index, indexed in
// part, whose chunks from Chunk on wait for later rounds. The backlog is
// stored, so what waits survives a restart; an entry goes with its
// message (an erasure, a deleted conversation).
type PendingIndex struct {
	// ID is the store's id of the entry, set by its reads: entries are
	// read in the order they were recorded.
	ID int64
	// Identity is the message's conversation: the one it lives in when
	// read (a message moved out of the default conversation takes its
	// entry along).
	Identity
	// Key is the message's key.
	Key string
	// Chunk is the first of the message's chunks not indexed yet.
	Chunk int
	// Offset is where Chunk starts in the message's indexable text (its
	// text without tool-call lines, trimmed), in bytes: later rounds cut
	// the message on from there, not from its start again. It moves with
	// Chunk (0 with a Chunk past 0: not known; a round finds it).
	Offset int
	// Bytes is the length of the message's text, which bounds what a
	// read of the backlog holds.
	Bytes int
	// Message is the message as stored when read (its role, text and
	// time), set by the store's reads.
	Message Message
	// Gone, set by the store's reads, reports that the message is no
	// longer live in its conversation (superseded by an edit, or no longer
	// stored): nothing more of it is indexed.
	Gone bool
	// Done, set for a store's ResolveIndex, says the message has nothing
	// left to index: its entry goes.
	Done bool
	// GuardSince guards the write of the entry, as Fact.GuardSince a
	// fact's: nothing is recorded of a user erased since.
	GuardSince time.Time
}

// MessageRef names one stored message: its conversation and key (a
// message item's Conversation and Ref).
type MessageRef struct {
	Conversation string
	Key          string
}

// ItemQuery is one recall search. Tenant and User always scope it; the store
// applies them inside the query.
type ItemQuery struct {
	Tenant string
	User   string
	// Conversation, when set, restricts the search to one conversation.
	Conversation string
	// ExcludeRefs are item refs never returned (turns already in the recent
	// window).
	ExcludeRefs []string
	// Embedding is the query vector, searched among items embedded with
	// Model and Dims (nil skips the vector search).
	Embedding []float32
	Model     string
	Dims      int
	// Text is the full-text query ("" skips the text search).
	Text string
	// Related are words related to Text's (its words' synonyms, broader
	// and narrower terms), each scoring an item as a word of Text would,
	// times its Weight. They widen the full-text search only: an item
	// holding a related word and none of Text's is found, below one that
	// holds Text's rarer words. See RelatedTerm for how stores apply them.
	Related []RelatedTerm
	// Limit bounds each ranked list.
	Limit int
	// Revisions are the user's revision counters, read once by the request
	// before its searches: a store that keeps the user's items in memory
	// keeps them under these. nil: the store reads them itself.
	Revisions *Revisions
}

// RecallQuery asks for what a user said before that bears on their newest
// message.
type RecallQuery struct {
	Identity
	// Text is the query: the newest user message (plus the previous
	// assistant turn when the message is short).
	Text string
	// ExcludeRefs are message keys already in the prompt (the recent window).
	ExcludeRefs []string
	// CrossConversation searches the user's other conversations too.
	CrossConversation bool
	// Now is the time facts are judged current at (expiry).
	Now time.Time
	// Budget is how many tokens of the prompt the recalled passages may
	// fill at most (0: unknown). A larger budget lets recall return more
	// passages, for the assembler to pack.
	Budget int
	// Revisions are the user's revision counters, read once by the request
	// before any of its reads (see ItemQuery.Revisions); nil: each read
	// that needs them reads them.
	Revisions *Revisions
	// EmbedBy, when not zero, is when the query stops waiting for its
	// embeddings: past it, recall goes on with full-text search alone
	// (Recalled.Lexical).
	EmbedBy time.Time
}

// Recalled is the answer to a RecallQuery, best first in each list.
type Recalled struct {
	// Facts are the user's current facts, pinned ones included, ranked by
	// relevance to the query, then mentions, then recency.
	Facts []Fact
	// Items are recalled passages, each with its Score, CreatedAt and
	// Conversation.
	Items []Item
	// Lexical is true when the query's embedding came too late and the
	// passages come from full-text search alone (facts then rank without
	// relevance to the query).
	Lexical bool
}

// Statement renders the fact as one line for a prompt: the value itself when
// it is a sentence that names its subject ("I moved to Porto last month"),
// else "key: value" ("city: Porto"), so a short extracted value never loses
// what it is about.
func (f Fact) Statement() string {
	words := len(strings.Fields(f.Value))
	key := strings.ReplaceAll(strings.TrimSpace(f.Key), "_", " ")
	if key == "" || words >= 4 || strings.Contains(strings.ToLower(f.Value), strings.ToLower(key)) {
		return f.Value
	}
	return key + ": " + f.Value
}

// Summary.Summariser values.
const (
	SummariserModel      = "model"
	SummariserExtractive = "extractive"
)
