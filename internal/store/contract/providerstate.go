package contract

import "github.com/memgate/memgate/internal/memory"

// Provider states (memory.StateBinding). A store keeps, per binding, the
// digest of the state's kind and id (StateDigest) — a provider id lets
// whoever holds it continue the state at the provider, so the database
// holds none in the clear — and the digest of its owner, the erasure
// tombstone key of the tenant's user (UserTombstone), which the user's
// erasure deletes the rows by. A row lapses at its expiry: it reads as
// unknown from then on, and each binding removes up to ExpiredStates
// lapsed rows, so the table holds about what the retention keeps.

// stateTag is the domain tag of the provider state digests.
const stateTag = "memgate/provider-state/v1\n"

// ExpiredStates bounds the lapsed bindings one binding removes.
const ExpiredStates = 64

// StateDigest returns the key of provider state s: SHA-256 of its domain
// tag, its kind and its id as netstrings.
func StateDigest(s memory.ProviderState) []byte {
	return tombstone(stateTag, string(s.Kind), s.ID)
}
