package memory

import "errors"

// ErrErased reports a write a store refused because the user it is about was
// erased at or after the time the written data was captured (its
// GuardSince: see Fact.GuardSince). Nothing was stored; the caller drops the
// work.
var ErrErased = errors.New("user erased")
