package record

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/memgate/memgate/internal/memory"
)

// maxBranchHops bounds how many branches of a derived conversation Route
// follows: a chat edited more often than that goes on in the last one,
// where a further edit supersedes as in a named conversation.
const maxBranchHops = 4

// HeadReader reads a conversation's first live messages as prints
// (internal/engine/cache's Reads over a store, which keeps them under the
// user's revision counters, so a chat that goes on is not read again).
type HeadReader interface {
	// ItemRevisions reads the user's revision counters.
	ItemRevisions(ctx context.Context, tenant, user string) (memory.Revisions, error)
	// Head returns the prints of a conversation's up to n first live
	// messages, oldest first, as of rev (nil: read from the store).
	Head(ctx context.Context, rev *memory.Revisions, id memory.Identity, n int) ([]memory.Print, error)
}

// Router places a request that names no conversation and resends its
// history in the branch of its derived conversation that the history
// continues. Two chats of one user that open alike (the same first user
// message, whatever their system prompts: two personas of one app) derive
// the same conversation, and so does a chat
// whose client edited an earlier message: storing such a request there
// would supersede, as an edit, the other chat's turns or the original
// branch. Route sends it to a conversation of its own instead
// (memory.BranchOf). It compares what memgate would store of the
// client's messages (sanitized and redacted, as the Capturer stores them)
// with what the conversation holds, so a secret the store holds redacted
// forks nothing. Reroute does the same at save time, for an exchange its
// conversation refused because another chat got there first.
type Router struct {
	reader   HeadReader
	replies  ReplyFinder // nil: no request continues a conversation it does not derive
	redactor Redactor    // nil: text is stored as is
	logger   *slog.Logger
}

// ReplyFinder looks a reply a client resent up among a user's stored
// conversations (implemented by the stores; storetest.RunReplied).
type ReplyFinder interface {
	// Replied returns the conversations of tenant's user, the default
	// one aside, whose live messages include an assistant's message with
	// text whose print is reply, most recently updated first (a few at
	// most), each with its up to n live messages ending at that reply.
	Replied(ctx context.Context, tenant, user string, reply memory.Print, n int) ([]memory.Replied, error)
}

// NewRouter returns a Router reading conversations through reader, looking
// replies up through replies (nil: Continued finds none) and comparing
// messages as redactor (nil: none) would store them; logger may be nil.
func NewRouter(reader HeadReader, replies ReplyFinder, redactor Redactor, logger *slog.Logger) *Router {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Router{reader: reader, replies: replies, redactor: redactor, logger: logger}
}

// Route returns where a request whose conversation id.Conversation was
// derived from its history (memory.DerivedConversation) goes on; msgs are
// the request's messages, system ones included (their memory.BranchSeed), and
// cut is what the request's exchange stores of them (memory.CutRequest,
// made once per request by its owner). It reads the user's revision
// counters and, as of them, the conversation's first live messages, one
// more than it compares (kept in memory as long as nothing changes the
// user's messages but the chat's own turns), and compares them with
// cut.Head() (the client's non-system messages, or, of a history the cut
// left messages out of, its first memory.BranchHead: what the save
// compares, memory.Exchange.Head), message by message (memory.Parts): when
// they part at some index, the request belongs to the branch that parts
// there (memory.BranchOf, which holds its history from the first message),
// checked the same way, up to maxBranchHops branches. A client whose
// messages the conversation starts with, or which start with all the
// conversation holds, stays: it goes on, or regenerates its last answer
// (the save supersedes the old answer).
//
// A chat an earlier memgate stored goes on where it is: when the derived
// conversation holds nothing and msgs carry a system message, Route reads
// the request's memory.LegacyConversation too (the id derived with the
// system messages hashed), and when that holds the history's start (they
// do not part at its first message) it routes from there, with its
// memory.LegacyBranchSeed, so the chat is not stored again whole under
// its new id.
//
// When the conversation it routes to still holds nothing (neither the
// derived one nor the legacy one held the history's start), empty reports
// so: a history that is a window of another conversation's tail (a
// client that cuts its history) may continue that one instead, looked up
// by its newest reply (Continued, the last step of the routing order:
// derived id, legacy id, window).
//
// A read that fails leaves the request where it got to, logged without
// contents; Route never fails the request. It returns the revision
// counters it read too (nil when the read failed), for the request's
// other reads (memory.Request.Revisions): they are the request's, never
// kept past it.
func (r *Router) Route(ctx context.Context, id memory.Identity, msgs []memory.Message, cut memory.Cut) (routed memory.Routed, rev *memory.Revisions, empty bool) {
	client := cut.Head()
	stored := map[int]memory.Message{} // client messages as they would be stored, by index
	form := func(i int) memory.Message { return r.storedForm(client, i, stored) }
	rev = r.revisions(ctx, id)
	from := memory.Routed{Conversation: id.Conversation, Seed: memory.BranchSeed(id.Tenant, id.User, msgs)}
	// The legacy id hashes the system messages (a RAG context can be
	// long): computed only when the derived conversation holds nothing.
	legacy := func() memory.Routed {
		if !slices.ContainsFunc(msgs, func(m memory.Message) bool { return memory.IsSystem(m.Role) }) {
			return memory.Routed{} // the legacy id is the derived one
		}
		return memory.Routed{Conversation: memory.LegacyConversation(id.Tenant, id.User, msgs), Seed: memory.LegacyBranchSeed(id.Tenant, id.User, msgs)}
	}
	routed, _, held, err := r.route(ctx, rev, id, from, legacy, client, form)
	if err != nil {
		r.logger.WarnContext(ctx, "routing a derived conversation: read failed; staying in it",
			"tenant", id.Tenant, "conversation", routed.Conversation, "error", err)
	}
	return routed, rev, err == nil && held == 0
}

// revisions reads the user's revision counters; nil when the read fails
// (the heads are then read from the store).
func (r *Router) revisions(ctx context.Context, id memory.Identity) *memory.Revisions {
	rev, err := r.reader.ItemRevisions(ctx, id.Tenant, id.User)
	if err != nil {
		return nil
	}
	return &rev
}

// Reroute returns ex, which its conversation refused (memory.SaveResult.Parted:
// the history ex resends parts from what the conversation holds now, as
// when another chat that opened alike stored its turns there while ex was
// in flight), in the conversation its history continues now, found as
// Route finds it from ex's derived conversation (its Root, else its own):
// the one its chat's next request is routed to. Root names the derived
// conversation when that is a branch of it. In the last branch Route
// follows, which ex parts from too, BranchSeed is cleared: ex is stored
// there as an edit. An error is a read that failed; ex is then returned
// unchanged.
func (r *Router) Reroute(ctx context.Context, ex memory.Exchange) (memory.Exchange, error) {
	if ex.BranchSeed == "" {
		return ex, nil
	}
	id := ex.Identity
	id.Conversation = cmp.Or(ex.Root, ex.Conversation)
	history := ex.Head()
	from := memory.Routed{Conversation: id.Conversation, Seed: ex.BranchSeed}
	routed, last, _, err := r.route(ctx, r.revisions(ctx, id), id, from, nil, history, func(i int) memory.Message { return history[i] })
	if err != nil {
		return ex, fmt.Errorf("route exchange %s again: %w", ex.ID, err)
	}
	ex.Conversation, ex.Root = routed.Conversation, routed.Root
	if last {
		ex.BranchSeed = ""
	}
	return ex, nil
}

// route follows, from from's conversation (id's), the branches that
// client (a request's non-system messages; form(i) is client[i] as
// memgate stores it) continues, whose ids derive from from's Seed
// (memory.BranchSeed). When from's conversation holds nothing, it goes
// on from legacy() (a memory.LegacyConversation and its seed; none when
// legacy is nil or its Conversation is "") instead if that holds
// client's start. It
// returns where client goes on (its Root the conversation it started
// from, when it went on in a branch of it), last when that is the last
// branch it may follow and client parts from it too, and how many of the
// first messages of where it goes on it read (n: 0 when that holds
// nothing). A failed read ends it with the error, in the conversation it
// got to. The heads are read as of rev (nil: from the store).
func (r *Router) route(ctx context.Context, rev *memory.Revisions, id memory.Identity, from memory.Routed, legacy func() memory.Routed, client []memory.Message,
	form func(i int) memory.Message) (routed memory.Routed, last bool, n int, err error) {
	printed := make([]memory.Print, len(client)) // client's prints, taken as compared
	cur := id
	routed = from
	at := func(c memory.Routed) memory.Routed {
		if c.Conversation != from.Conversation {
			c.Root = from.Conversation
		}
		return c
	}
	for hop := 0; ; hop++ {
		cur.Conversation = routed.Conversation
		held, err := r.reader.Head(ctx, rev, cur, len(client)+1)
		if err != nil {
			return at(routed), false, 0, err
		}
		if hop == 0 && len(held) == 0 && legacy != nil {
			if l := legacy(); l.Conversation != "" {
				cur.Conversation = l.Conversation
				old, err := r.reader.Head(ctx, rev, cur, len(client)+1)
				if err != nil {
					return at(routed), false, 0, err
				}
				if len(old) > 0 && parts(old, client, printed, form) != 0 {
					from, routed, held = l, l, old
				}
			}
		}
		i := parts(held, client, printed, form)
		if i < 0 {
			return at(routed), false, len(held), nil
		}
		if hop == maxBranchHops {
			return at(routed), true, len(held), nil
		}
		start := make([]memory.Message, i+1)
		for j := range start {
			start[j] = form(j)
		}
		routed.Conversation = memory.BranchOf(from.Seed, start, i)
	}
}

// parts is memory.Parts of held (a conversation's first messages, as
// prints) and client as memgate would store it (form): a client's message
// equal to the held one, as most are, is never sanitized and redacted to
// be compared (sanitizing and redacting text already stored leave it as it
// is). printed keeps the prints of client's messages across calls (the
// zero Print: not taken yet).
func parts(held []memory.Print, client []memory.Message, printed []memory.Print, form func(i int) memory.Message) int {
	for i := range min(len(held), len(client)) {
		if printed[i] == (memory.Print{}) {
			printed[i] = client[i].Print()
		}
		if held[i].Diverges(printed[i]) && held[i].Diverges(form(i).Print()) {
			return i
		}
	}
	return -1
}

// storedForm returns client[i] as the Capturer would store it, sanitized
// and redacted, memoized in stored. A message the redactor cannot read is
// compared as sanitized only.
func (r *Router) storedForm(client []memory.Message, i int, stored map[int]memory.Message) memory.Message {
	if m, ok := stored[i]; ok {
		return m
	}
	m := StoredForm(client[i], r.redactor)
	stored[i] = m
	return m
}

// Continued returns the conversation a request that names none continues
// when its resent history is a window of that conversation's tail (the
// client cut its history: it keeps its last messages, or drops its oldest
// turns once its model's context fills), found by the newest reply it
// resends (memory.NewestReply), which memgate relayed and stored: the
// most recently updated conversation of the user whose live messages
// ending at that reply are the client's, from its first through that
// reply, as memgate stores them, after at least one message the client
// no longer resends (memory.ContinuesTail: one for one, at least one a
// user's, or the reply alone when it is memory.LoneReply and no other
// conversation of the user holds it; a history that starts where the conversation starts is Route's
// to place, and another chat that opens alike never continues it so). It
// returns "" when there is none, when the
// user's default conversation holds the window through that reply (the
// history is a full-history chat's, whose first turn is stored there and
// adopted by the conversation its history derives), when the request
// resends no reply, or when its history was cut
// (memory.CutHistory: its first message is no longer the client's). id
// is the request's identity; cut the request's memory.Cut. It is for a
// request whose derived conversation (and the earlier id's, or the
// branch Route placed it in) holds nothing (Route's empty), so only such
// requests pay the lookup;
// an error is a failed read, and the caller stays where Route placed it.
func (r *Router) Continued(ctx context.Context, id memory.Identity, cut memory.Cut) (string, error) {
	if r.replies == nil || cut.Skipped > 0 || len(cut.Prior) == 0 {
		return "", nil
	}
	window := make([]memory.Message, len(cut.Prior))
	for i, m := range cut.Prior {
		window[i] = StoredForm(m, r.redactor)
	}
	at := memory.NewestReply(window)
	if at < 0 {
		return "", nil
	}
	window = window[:at+1]
	found, err := r.replies.Replied(ctx, id.Tenant, id.User, window[at].Print(), len(window)+1)
	if err != nil {
		return "", fmt.Errorf("look the newest resent reply up: %w", err)
	}
	for _, f := range found {
		if f.Conversation == memory.DefaultConversation && memory.EndsWith(f.Tail, window) {
			// A full-history chat's first turn, which its continuation
			// adopts into the conversation its history derives
			// (Adopter): the history is the chat's whole, not a cut.
			return "", nil
		}
	}
	// A reply resent alone (memory.LoneReply) tells the chat only when no
	// other conversation of the user holds it.
	lone := memory.LoneReply(window)
	if lone && len(found) > 1 {
		return "", nil
	}
	for _, f := range found {
		if f.Conversation != id.Conversation && f.Conversation != memory.DefaultConversation && memory.ContinuesTail(f.Tail, window) {
			return f.Conversation, nil
		}
	}
	return "", nil
}
