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
	return memory.TaggedDigest(stateTag, string(s.Kind), s.ID)
}

// StateLookup is the lookup of which of a list of states are bound: the
// distinct digests to ask the store for, and where each answer goes.
type StateLookup struct {
	// Digests are the states' distinct digests.
	Digests [][]byte
	at      map[string][]int // digest → the states' indexes
	bound   []bool
}

// NewStateLookup returns the lookup of sts, none of them bound yet.
func NewStateLookup(sts []memory.ProviderState) *StateLookup {
	l := &StateLookup{at: make(map[string][]int, len(sts)), bound: make([]bool, len(sts))}
	for i, st := range sts {
		d := StateDigest(st)
		if _, seen := l.at[string(d)]; !seen {
			l.Digests = append(l.Digests, d)
		}
		l.at[string(d)] = append(l.at[string(d)], i)
	}
	return l
}

// Found marks the states of digest d bound.
func (l *StateLookup) Found(d []byte) {
	for _, i := range l.at[string(d)] {
		l.bound[i] = true
	}
}

// Bound is, for each state, whether it was found.
func (l *StateLookup) Bound() []bool { return l.bound }
