package memory

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// HasToolCalls reports whether m is an assistant message carrying tool calls
// (or a legacy function_call). It reads what ParseMessage kept of Raw when
// it can (see Message.Decoded), else Raw.
func (m Message) HasToolCalls() bool {
	if m.Role != "assistant" || len(m.Raw) == 0 {
		return false
	}
	if p := m.kept(); p != nil && !p.Malformed {
		return len(p.Calls) > 0
	}
	var w struct {
		ToolCalls    []json.RawMessage `json:"tool_calls"`
		FunctionCall json.RawMessage   `json:"function_call"`
	}
	if json.Unmarshal(m.Raw, &w) != nil {
		return false
	}
	fc := bytes.TrimSpace(w.FunctionCall)
	return len(w.ToolCalls) > 0 || (len(fc) > 0 && string(fc) != "null")
}

// SplitCurrent splits a client's non-system messages into the earlier turns
// it resent and its current turn; it is memgate's one definition of the
// current turn. The current turn is the trailing tool loop — assistant
// messages with tool calls and the tool results answering them — together
// with the user message(s) just before it, if any, and the user message(s)
// right after its results, which ask on before the assistant answered the
// loop (Anthropic's user message holding tool_result blocks and text, a
// Responses function_call_output followed by a message): for a client that
// sends only what is new, [user], [user, assistant(tool_calls), tool],
// [assistant(tool_calls), tool] and [tool, user] are all a current turn
// with no earlier turns, and continue the stored conversation. Earlier is
// empty exactly when the client sent no turn before its current one.
func SplitCurrent(msgs []Message) (earlier, current []Message) {
	i := len(msgs) - 1
	for i >= 0 && msgs[i].Role == "user" {
		i--
	}
	if i >= 0 && i < len(msgs)-1 && !IsResult(msgs[i].Role) {
		// The user messages follow a reply (or an unanswered call):
		// they alone are the current turn.
		return msgs[:i+1], msgs[i+1:]
	}
	for i >= 0 && (IsResult(msgs[i].Role) || msgs[i].HasToolCalls()) {
		i--
	}
	for i >= 0 && msgs[i].Role == "user" {
		i--
	}
	return msgs[:i+1], msgs[i+1:]
}

// SplitAnswered splits a client's non-system messages at its last
// assistant message: answered runs through it (the replies the client
// resent, which memgate stored when it relayed them), unanswered is what
// follows (the messages the reply to this request answers: a user message,
// or the tool results of the last assistant's calls). It is not the current
// turn (SplitCurrent): a tool loop's assistant call is answered, though
// the loop is still the current turn. A stored exchange keeps answered as
// its Prior and unanswered as its Turn.
func SplitAnswered(msgs []Message) (answered, unanswered []Message) {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "assistant" {
			return msgs[:i+1], msgs[i+1:]
		}
	}
	return nil, msgs
}

// DefaultConversation is the conversation of a user's requests that name none
// and carry only their newest turn: one per user.
const DefaultConversation = "default"

// DerivedConversation is the conversation id of a request that names none but
// resends its history: a hash of the tenant, the user and the first user
// message, so every turn of the same chat — each resending the same start —
// lands in one conversation. msgs are the request's messages; their system
// and developer messages are not hashed: many clients change them on every
// request (the current time, context retrieved for the turn, a lorebook
// entry, a profile block), which would give every turn a conversation of
// its own. Chats that open alike are told apart by their histories (see
// BranchOf).
func DerivedConversation(tenant, user string, msgs []Message) string {
	return derive(tenant, user, msgs, false)
}

// LegacyConversation is the conversation id an earlier memgate derived for
// a request that names none (DerivedConversation with the system and
// developer messages hashed too), under which the chats it stored go on.
// It is DerivedConversation for a request carrying no system message.
func LegacyConversation(tenant, user string, msgs []Message) string {
	return derive(tenant, user, msgs, true)
}

// derive is DerivedConversation, hashing msgs' system and developer
// messages too when system is set (LegacyConversation).
func derive(tenant, user string, msgs []Message, system bool) string {
	h := sha256.New()
	for _, s := range []string{tenant, user} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	var first string
	for _, m := range msgs {
		if IsSystem(m.Role) {
			if system {
				h.Write([]byte(m.Content))
				h.Write([]byte{0})
			}
			continue
		}
		if m.Role == "user" && first == "" {
			first = m.Content
		}
	}
	h.Write([]byte{1})
	h.Write([]byte(strings.TrimSpace(first)))
	return "chat-" + hex.EncodeToString(h.Sum(nil))[:32]
}

// ImpliedConversation is the conversation of a request that names none. A
// client that resends earlier turns gets DerivedConversation, so every turn
// of one chat lands in one conversation; a client that sends only its
// current turn (a user message, or a tool loop; see SplitCurrent) continues
// the user's DefaultConversation. msgs are the request's messages, system
// ones included (they decide nothing).
func ImpliedConversation(tenant, user string, msgs []Message) string {
	rest := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		if !IsSystem(m.Role) {
			rest = append(rest, m)
		}
	}
	if earlier, _ := SplitCurrent(rest); len(earlier) > 0 {
		return DerivedConversation(tenant, user, msgs)
	}
	return DefaultConversation
}

// Candidate returns the conversation a full-history continuation of a
// request that names none would derive, when the request lands in the
// user's DefaultConversation (it resent no earlier turn), else "". msgs are
// the request's messages, system ones included.
func Candidate(tenant, user string, msgs []Message) string {
	if ImpliedConversation(tenant, user, msgs) != DefaultConversation {
		return ""
	}
	return DerivedConversation(tenant, user, msgs)
}

// Adoptable returns how many messages of stored (the live messages of the
// user's DefaultConversation from the first message of an exchange recorded
// with a candidate, in Seq order) a full-history continuation whose resent
// history is prior adopts: the longest run of whole exchanges (messages
// sharing their Key's exchange id) whose messages equal prior's, from its
// start, by Fingerprint. It is 0 when not even the first exchange matches
// whole. A request that went on with the reply its history ends with
// (Prefilled) adopts with that partial reply in prior
// (Exchange.Partial), so it takes its own chat's exchange only.
func Adoptable(stored, prior []Message) int {
	n, whole := 0, 0
	for n < len(stored) && n < len(prior) && stored[n].Fingerprint() == prior[n].Fingerprint() {
		n++
		if n == len(stored) || ExchangeOf(stored[n].Key) != ExchangeOf(stored[n-1].Key) {
			whole = n
		}
	}
	return whole
}

// StartsWith reports whether msgs begins with want, by Fingerprint.
func StartsWith(msgs, want []Message) bool {
	if len(want) == 0 || len(msgs) < len(want) {
		return false
	}
	for i, m := range want {
		if msgs[i].Fingerprint() != m.Fingerprint() {
			return false
		}
	}
	return true
}

// ExchangeOf returns the exchange id of a message key (see Key).
func ExchangeOf(key string) string {
	if i := strings.LastIndexByte(key, ':'); i >= 0 {
		return key[:i]
	}
	return key
}
