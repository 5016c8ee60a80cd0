package memory

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"time"
)

// Held responses. A background response (the Responses API's
// background: true) is answered at once with no output; its exchange
// waits, held in the store every gateway process shares, until a GET
// returns the response done, on whichever process. The store keys a held
// exchange by digests only, as the tombstones: HeldDigest of the tenant
// and the provider's response id (an id that lets whoever holds it read
// the response at the provider), UserTombstone of its owner (by which an
// erasure deletes it), ConversationTombstone of its conversation (by
// which a deletion does).

// heldTag is the domain tag of the held responses' keys.
const heldTag = "memgate/held-response/v1\n"

// HeldDigest returns the key of tenant's background response id: SHA-256
// of its domain tag and the two ids as netstrings.
func HeldDigest(tenant, id string) []byte { return TaggedDigest(heldTag, tenant, id) }

// HeldLimits bound what the store holds of one tenant's background
// responses, and for how long.
const (
	// HeldMax bounds the held exchanges of a tenant: holding one more
	// gives up its oldest.
	HeldMax = 1024
	// HeldMaxBytes bounds the encoded size of a tenant's held exchanges
	// (the oldest given up first).
	HeldMaxBytes = 64 << 20
	// HeldExchangeMaxBytes bounds the encoded size of one held exchange
	// (the capture cap of a reply): a larger one is never held
	// (ErrHeldTooLarge), so that no one exchange gives up a tenant's
	// others.
	HeldExchangeMaxBytes = 4 << 20
	// HeldTTL is how long a held exchange waits for its answer.
	HeldTTL = time.Hour
	// HeldLease is how long a claim keeps a held exchange from other
	// claims, and from being given up (lapsed, or past the tenant's
	// bounds, which count it all the same): the claimer deletes it once
	// its turn is durable; a claimer that crashed, or whose capture did
	// not settle, leaves it to be claimed again once the lease lapsed
	// (stored again under the same exchange id, the store finds it
	// stored).
	HeldLease = time.Minute
)

// NewExchangeID returns a new random exchange id ("ex-" and 32 hex
// digits): the key of an exchange and of its messages, unique within any
// tenant, user and conversation.
func NewExchangeID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "ex-" + hex.EncodeToString(b[:])
}

// IsExchangeID reports whether id is one NewExchangeID returns.
func IsExchangeID(id string) bool {
	h, ok := strings.CutPrefix(id, "ex-")
	if !ok || len(h) != 32 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil && strings.ToLower(h) == h
}

// HeldResponse is the exchange of a background response not answered
// yet, held until a GET returns the response done.
type HeldResponse struct {
	// Identity is the exchange's: its owner, and its conversation.
	Identity
	// ID is the provider's response id.
	ID string
	// Exchange is the exchange, encoded, prepared as it would be stored
	// (its history checked, sanitized, redacted), its reply still to
	// come; the store keeps it as opaque bytes.
	Exchange []byte
	// At is when the request arrived: an erasure of the user at or after
	// it refuses the hold (ErrErased).
	At time.Time
	// Received is when the gateway received the request
	// (Exchange.Received): a deletion of its conversation at or after it
	// refuses the hold (ErrHeldDeleted), as it drops a save.
	Received time.Time
	// Expires is when the held exchange is given up.
	Expires time.Time
	// Now is when it is held, by the gateway's clock: the store gives
	// up the held exchanges lapsed by then, and none under a claim's
	// lease then.
	Now time.Time
}

var (
	// ErrHeldTooLarge: an exchange larger than HeldExchangeMaxBytes is
	// never held.
	ErrHeldTooLarge = errors.New("background exchange larger than the held responses' bound")
	// ErrHeldLapsed: the held exchange claimed had lapsed (HeldTTL)
	// before its answer came.
	ErrHeldLapsed = errors.New("held background exchange lapsed before its answer")
	// ErrHeldDeleted: the background exchange's conversation was deleted
	// since its request arrived; it is never held.
	ErrHeldDeleted = errors.New("background exchange's conversation deleted since its request arrived")
)
