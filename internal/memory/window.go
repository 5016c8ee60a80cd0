package memory

import (
	"time"
	"unicode/utf8"
)

// Replied is a conversation holding, among its live messages, a reply (an
// assistant message) that a client resent: what a store's lookup of the
// reply by its print (Message.Print) returns of each conversation holding
// it, for ContinuesTail.
type Replied struct {
	// Conversation is the conversation's id.
	Conversation string
	// UpdatedAt is when the conversation last changed.
	UpdatedAt time.Time
	// Tail is the conversation's live messages ending at the reply (its
	// newest live occurrence), oldest first: as many as were asked for, or
	// all the conversation holds up to it.
	Tail []Message
}

// NewestReply returns the index of the last assistant message of history
// that has text (a client's non-system messages, as memgate stores them),
// or -1 when there is none: the reply a client that resends only a window
// of its history is found by (see ContinuesTail). A tool call's empty text
// repeats across chats too readily to tell one.
func NewestReply(history []Message) int {
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].Role == "assistant" && history[i].Content != "" {
			return i
		}
	}
	return -1
}

// ContinuesTail reports whether window (a client's resent messages from
// its first through the reply it was found by, as memgate stores them:
// sanitized and redacted) is a cut of the tail of a conversation holding
// that reply (held: Replied.Tail, read with len(window)+1 messages at
// most): the conversation holds at least one message before the window,
// and then the window's messages, by Fingerprint, one for one, ending at
// the reply, at least one of them a user's message with text. A client
// that cuts its history (keeping its last messages, or dropping its
// oldest turns once its model's context fills) resends such a window; its
// request continues the conversation, as if it had named it. A history
// that starts where the conversation starts is no cut: it derives its
// conversation, or a branch of it, from that start (DerivedConversation,
// BranchOf), and another chat opening alike (a greeting answered alike)
// never joins it so. One reply alone (a client keeping its last two
// messages: the reply and its new question) is evidence only when it is
// LoneReply, long enough to tell a chat by; the caller takes it only when
// no other conversation of the user holds it.
func ContinuesTail(held, window []Message) bool {
	if len(window) == 0 || len(held) != len(window)+1 {
		return false
	}
	said := false
	for i, m := range window {
		if held[i+1].Fingerprint() != m.Fingerprint() {
			return false
		}
		said = said || m.Role == "user" && m.Content != ""
	}
	return said || LoneReply(window)
}

// minLoneReply is how many characters a reply a window resends alone must
// have (ComparedContent) to tell a chat by (LoneReply): a stock reply
// ("OK.", "Sure!", a greeting) repeats across a user's chats.
const minLoneReply = 64

// LoneReply reports whether window (see ContinuesTail) is one reply alone,
// long enough to tell a chat by (minLoneReply characters).
func LoneReply(window []Message) bool {
	return len(window) == 1 && window[0].Role == "assistant" && utf8.RuneCountInString(window[0].ComparedContent()) >= minLoneReply
}

// EndsWith reports whether msgs ends with want, by Fingerprint.
func EndsWith(msgs, want []Message) bool {
	if len(want) == 0 || len(msgs) < len(want) {
		return false
	}
	return StartsWith(msgs[len(msgs)-len(want):], want)
}
