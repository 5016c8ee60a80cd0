package memory

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
)

// BranchSeed is what the ids of a derived conversation's branches hash
// besides the history: a digest, in hex, of the tenant and the user. It
// reveals neither. An exchange carries it (Exchange.BranchSeed), so that
// its save can find the branch its history continues (BranchOf). msgs (a
// request's messages) are not hashed, their system and developer messages
// no more than in DerivedConversation: a system prompt that changes on
// every request must not move the chat to another branch.
func BranchSeed(tenant, user string, msgs []Message) string {
	return seed(tenant, user, msgs, false)
}

// LegacyBranchSeed is the BranchSeed an earlier memgate gave a request
// (the system and developer messages of msgs hashed too), from which the
// branches of its LegacyConversation were derived. It is BranchSeed for a
// request carrying no system message.
func LegacyBranchSeed(tenant, user string, msgs []Message) string {
	return seed(tenant, user, msgs, true)
}

// seed is BranchSeed, hashing msgs' system and developer messages too
// when system is set (LegacyBranchSeed).
func seed(tenant, user string, msgs []Message, system bool) string {
	h := sha256.New()
	h.Write([]byte("memgate branch seed\x00"))
	field(h, tenant)
	field(h, user)
	for _, m := range msgs {
		if system && IsSystem(m.Role) {
			field(h, m.Content)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Routed is where a request that names no conversation and resends its
// history goes on (internal/engine/record's Router), and what its
// exchange carries so that its save finds the same place: the
// conversation derived from its history (DerivedConversation, or the
// LegacyConversation an earlier memgate stored its chat in), the branch
// of it the history continues (BranchOf), or, when none of those holds
// anything and the history is a window of a conversation's tail
// (ContinuesTail), that conversation.
type Routed struct {
	// Conversation is the conversation the request goes on in: its
	// DerivedConversation (or the LegacyConversation an earlier memgate
	// stored its chat in), a branch of that one (BranchOf), or the
	// conversation its cut history continues (Continued).
	Conversation string
	// Root is the conversation Conversation is a branch of; "" when it
	// is none (Exchange.Root), and when Continued.
	Root string
	// Seed is the BranchSeed the ids of Root's branches derive from
	// (Exchange.BranchSeed); "" when Continued.
	Seed string
	// Continued is true when Conversation was found by the newest reply
	// the request resends rather than derived from its history's start:
	// its exchange is stored there as a named conversation's is (no
	// branch guard, no root, no seed), aligned with the conversation's
	// tail.
	Continued bool
	// Revisions are the user's revision counters routing read, when they
	// may serve the request's Prepare (Request.Revisions; nil: Prepare
	// reads them).
	Revisions *Revisions
}

// BranchOf is the conversation of a branch of a derived conversation: a
// request that names none, whose resent history parts from what its
// DerivedConversation holds (another chat opening the same way, or an
// edit), continues in the conversation of its own history's start,
// through the first message that differs (see Parts). It hashes seed (the
// request's BranchSeed) and, by Fingerprint, the messages of history (its
// non-system messages, as memgate stores them: sanitized and redacted) up
// to and including the one at index through, under a marker of its own,
// so it never equals a DerivedConversation. Its form is
// DerivedConversation's: "chat-" and 32 hex digits.
func BranchOf(seed string, history []Message, through int) string {
	h := sha256.New()
	h.Write([]byte("memgate branch\x00"))
	field(h, seed)
	h.Write([]byte{2})
	for _, m := range history[:min(len(history), through+1)] {
		// The text as it was said, white space included: a branch's id
		// is what earlier builds derived for it.
		field(h, m.Role+"\x00"+m.Content)
	}
	return "chat-" + hex.EncodeToString(h.Sum(nil))[:32]
}

// BranchConversation is BranchOf the request whose messages (system ones
// included) are msgs: its BranchSeed and its non-system messages, through
// counted among them.
func BranchConversation(tenant, user string, msgs []Message, through int) string {
	history := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		if !IsSystem(m.Role) {
			history = append(history, m)
		}
	}
	return BranchOf(BranchSeed(tenant, user, msgs), history, through)
}

// field writes s to h preceded by its length, so that no two sequences of
// fields hash alike.
func field(h hash.Hash, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	h.Write(n[:])
	h.Write([]byte(s))
}

// Parts returns the first index at which held (a conversation's live
// messages from its first) and history (a client's non-system messages,
// as memgate stores them) both have a message and the two part (Diverges),
// or -1 when there is none. Storing history in that conversation would
// supersede, as an edit, what the conversation holds from that index on:
// it belongs in a branch of its own (BranchOf) instead. A history the
// conversation starts with, or that starts with all the conversation
// holds, does not part: it goes on, or regenerates its last answer.
func Parts(held, history []Message) int {
	for i := range min(len(held), len(history)) {
		if Diverges(held[i], history[i]) {
			return i
		}
	}
	return -1
}

// Diverges reports whether a stored message and a client's message at the
// same index of a history part it (see Parts): they differ by
// Fingerprint, and are not both assistant messages. What a client resends
// of a reply may differ from the reply memgate stored (trimmed, a
// reasoning block cut out of its text), which would otherwise branch every
// turn of such a client; the save aligns the two (the client's version
// supersedes the stored one), and a history that differs parts at its next
// user or tool message.
func Diverges(stored, client Message) bool {
	return stored.Fingerprint() != client.Fingerprint() && !(stored.Role == "assistant" && client.Role == "assistant")
}

// Print is what comparing a message with another by Fingerprint needs of
// it, in 17 bytes: a digest of its Fingerprint, and whether it is an
// assistant's (see Diverges). A conversation's first messages are kept so
// (internal/engine/cache's Head), for routing.
type Print struct {
	Sum       [16]byte
	Assistant bool
}

// Print returns m's Print.
func (m Message) Print() Print {
	b := make([]byte, 0, len(m.Role)+1+len(m.Content))
	sum := sha256.Sum256(append(append(append(b, m.Role...), 0), m.ComparedContent()...)) // Fingerprint's bytes
	p := Print{Assistant: m.Role == "assistant"}
	copy(p.Sum[:], sum[:])
	return p
}

// Diverges is Diverges of the messages whose prints are p (the stored
// one) and q.
func (p Print) Diverges(q Print) bool {
	return p.Sum != q.Sum && !(p.Assistant && q.Assistant)
}

// Held is a stored message as a conversation's first messages are kept
// (internal/engine/cache's Head): its Print, its Seq, and whether it is a
// tool result (IsResult), which the prompt's check of a resent
// history against the summary needs (a client trims its old tool results),
// and its Key, which names it as the source of the facts it stated
// (Fact.Source): those an edit of it leaves out of its request's prompt.
type Held struct {
	Print
	Seq  int64
	Tool bool
	Key  string
}

// Held returns m's Held.
func (m Message) Held() Held {
	return Held{Print: m.Print(), Seq: m.Seq, Tool: IsResult(m.Role), Key: m.Key}
}
