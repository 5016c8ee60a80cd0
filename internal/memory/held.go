package memory

import (
	"errors"
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
	// (the oldest given up first); a larger exchange is never held.
	HeldMaxBytes = 64 << 20
	// HeldTTL is how long a held exchange waits for its answer.
	HeldTTL = time.Hour
)

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
	// Expires is when the held exchange is given up.
	Expires time.Time
}

var (
	// ErrHeldTooLarge: an exchange larger than HeldMaxBytes is never
	// held.
	ErrHeldTooLarge = errors.New("background exchange larger than the held responses' bound")
	// ErrHeldLapsed: the held exchange claimed had lapsed (HeldTTL)
	// before its answer came.
	ErrHeldLapsed = errors.New("held background exchange lapsed before its answer")
)
