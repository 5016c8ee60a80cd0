package record

import (
	"context"
	"log/slog"

	"github.com/memgate/memgate/internal/memory"
)

// maxBranchHops bounds how many branches of a derived conversation Route
// follows: a chat edited more often than that goes on in the last one,
// where a further edit supersedes as in a named conversation.
const maxBranchHops = 4

// MessageReader reads a conversation's live messages (the stores'
// MessagesAfter).
type MessageReader interface {
	// MessagesAfter returns up to limit live messages with Seq > afterSeq,
	// oldest first.
	MessagesAfter(ctx context.Context, id memory.Identity, afterSeq int64, limit int) ([]memory.Message, error)
}

// Router places a request that names no conversation and resends its
// history in the branch of its derived conversation that the history
// continues. Two chats of one user that open alike (the same system prompt
// and first user message) derive the same conversation, and so does a chat
// whose client edited an earlier message: storing such a request there
// would supersede, as an edit, the other chat's turns or the original
// branch. Route sends it to a conversation of its own instead
// (memory.BranchConversation). It compares what memgate would store of the
// client's messages (sanitized and redacted, as the Capturer stores them)
// with what the conversation holds, so a secret the store holds redacted
// forks nothing.
type Router struct {
	reader   MessageReader
	redactor Redactor // nil: text is stored as is
	logger   *slog.Logger
}

// NewRouter returns a Router reading conversations through reader and
// comparing messages as redactor (nil: none) would store them; logger may
// be nil.
func NewRouter(reader MessageReader, redactor Redactor, logger *slog.Logger) *Router {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Router{reader: reader, redactor: redactor, logger: logger}
}

// Route returns the conversation of a request whose conversation id.Conversation
// was derived from its history (memory.DerivedConversation); msgs are the
// request's messages, system ones included. It reads the conversation's
// first live messages, one more than the client sent, and compares them
// with the client's non-system messages, message by message: when both
// have a message at some index and the two differ (see parts), the
// request belongs to
// the branch that parts there (memory.BranchConversation, which holds its
// history from the first message), checked the same way, up to
// maxBranchHops branches. A client whose messages the conversation starts
// with, or which start with all the conversation holds, stays: it goes on,
// or regenerates its last answer (the save supersedes the old answer). A
// read that fails leaves the request where it got to, logged without
// contents; Route never fails the request.
func (r *Router) Route(ctx context.Context, id memory.Identity, msgs []memory.Message) string {
	client := make([]memory.Message, 0, len(msgs))
	for _, m := range msgs {
		if !memory.IsSystem(m.Role) {
			client = append(client, m)
		}
	}
	stored := map[int]memory.Message{} // client messages as they would be stored, by index
	conv := id
	for hop := 0; ; hop++ {
		held, err := r.reader.MessagesAfter(ctx, conv, 0, len(client)+1)
		if err != nil {
			r.logger.WarnContext(ctx, "routing a derived conversation: read failed; staying in it",
				"tenant", id.Tenant, "conversation", conv.Conversation, "error", err)
			return conv.Conversation
		}
		at := r.parts(held, client, stored)
		if at < 0 || hop == maxBranchHops {
			return conv.Conversation
		}
		start := make([]memory.Message, 0, len(msgs))
		for _, m := range msgs {
			if memory.IsSystem(m.Role) {
				start = append(start, m)
			}
		}
		for i := range at + 1 {
			start = append(start, r.storedForm(client, i, stored))
		}
		conv.Conversation = memory.BranchConversation(id.Tenant, id.User, start, at)
	}
}

// parts returns the first index at which held (a conversation's live
// messages from its first) and client (the client's non-system messages)
// both have a message and the two differ by Fingerprint, comparing the
// client's as they would be stored; -1 when there is none. Two assistant
// messages never part a history: what a client resends of a reply may
// differ from the reply memgate stored (trimmed, a reasoning block cut out
// of its text), which would otherwise branch every turn of such a client;
// the save aligns them as before (the client's version supersedes the
// stored one), and a chat that differs goes apart at its next user or
// tool message.
func (r *Router) parts(held, client []memory.Message, stored map[int]memory.Message) int {
	for i := range min(len(held), len(client)) {
		if held[i].Fingerprint() == client[i].Fingerprint() {
			// Sanitizing and redacting text already stored leave it as it is.
			continue
		}
		if held[i].Role == "assistant" && client[i].Role == "assistant" {
			continue
		}
		if held[i].Fingerprint() != r.storedForm(client, i, stored).Fingerprint() {
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
	m, _ := SanitizeMessage(client[i])
	if r.redactor != nil {
		if red, _, err := r.redactor.Message(m); err == nil {
			m = red
		}
	}
	stored[i] = m
	return m
}
