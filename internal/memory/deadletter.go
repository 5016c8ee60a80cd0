package memory

import "time"

// DeadLetter is a captured exchange that no store would accept (a
// constraint violation, text the database refuses): kept aside with the
// reason, so it neither blocks the turns behind it nor vanishes silently.
type DeadLetter struct {
	// Exchange is the id of the exchange (Exchange.ID).
	Exchange string
	Identity
	// Reason is the store's error, for operators.
	Reason string
	// Payload is the exchange as captured (JSON, redacted).
	Payload []byte
	// At is when it was set aside.
	At time.Time
}
