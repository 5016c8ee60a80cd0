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
	// At is when the exchange was said (Exchange.At); zero: when it was set
	// aside. A store writes no dead letter of a user erased at or after At.
	At time.Time
	// Received is when the gateway received the exchange
	// (Exchange.Received); zero: At stands for it. A store writes no dead
	// letter of an exchange received at or before its conversation was
	// last deleted: the deletion removed the conversation's dead letters,
	// and one set aside later must not keep its text at rest.
	Received time.Time
}
