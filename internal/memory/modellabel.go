package memory

import (
	"crypto/sha256"
	"encoding/hex"
)

// MaxModelLabel bounds, in bytes, the model name memgate keeps beside a
// request where it outlives or multiplies it: a circuit breaker's key and
// gauge label, trace attributes. The name comes from the client's body.
const MaxModelLabel = 128

// ModelLabel returns the name kept for a request's model: the model itself
// when at most MaxModelLabel bytes, else its first bytes, an ellipsis and a
// digest of the whole (no provider's model id is that long, and two such
// names still differ).
func ModelLabel(model string) string {
	if len(model) <= MaxModelLabel {
		return model
	}
	sum := sha256.Sum256([]byte(model))
	const digest = 16 // hex digits
	return Truncate(model, MaxModelLabel-len("…")-digest) + "…" + hex.EncodeToString(sum[:])[:digest]
}
