package memory

import "strings"

// Plan is what storing an exchange does to a conversation's live branch,
// decided by Align.
type Plan struct {
	// SupersedeFrom is the Seq from which stored messages leave the live
	// branch (the client edited or regenerated a turn); 0 means none do.
	SupersedeFrom int64
	// Prior is the part of the client's history memgate has not stored yet;
	// it is stored before the exchange's turn and reply.
	Prior []Message
}

// Align compares the history a client resent (prior) with the live branch of
// the stored conversation (stored, in Seq order) and decides what is new.
//
// The client's history is matched against the stored messages at the offset
// where the longest run of equal fingerprints starts (the latest such offset
// on ties), so a client that sends only a window of its history still aligns.
//   - The run reaches the end of the stored branch: the remainder of prior is
//     new (history the gateway never saw) and nothing is superseded.
//   - The run stops inside the stored branch: the client edited or
//     regenerated an earlier turn. The stored messages after the run are
//     superseded (kept, no longer live) and the rest of prior is stored as the
//     new branch.
//   - Nothing matches: all of prior is new.
//
// Clients that send only their newest turn have an empty prior, and Align
// returns an empty plan.
func Align(stored, prior []Message) Plan {
	if len(prior) == 0 {
		return Plan{}
	}
	bestOff, bestLen := -1, 0
	for off, n := range runs(stored, prior) {
		if n > 0 && n >= bestLen {
			bestOff, bestLen = off, n
		}
	}
	if bestOff < 0 {
		return Plan{Prior: prior}
	}
	p := Plan{Prior: prior[bestLen:]}
	if end := bestOff + bestLen; end < len(stored) {
		p.SupersedeFrom = stored[end].Seq
	}
	return p
}

// runs returns, for each offset of stored, how many messages of prior, from
// its first, stored repeats from that offset on (by Fingerprint). It is the
// Z-function of prior, a separator and stored, each message numbered by
// its fingerprint: linear in their lengths, so a history that repeats one
// message thousands of times costs no more to align than any other (a
// run extended from every offset in turn would cost their product).
func runs(stored, prior []Message) []int {
	ids := make(map[string]int, len(prior))
	seq := make([]int, 0, len(prior)+1+len(stored))
	number := func(m Message) int {
		fp := m.Fingerprint()
		id, ok := ids[fp]
		if !ok {
			id = len(ids)
			ids[fp] = id
		}
		return id
	}
	for _, m := range prior {
		seq = append(seq, number(m))
	}
	seq = append(seq, -1) // matches no message: a run never crosses it
	for _, m := range stored {
		seq = append(seq, number(m))
	}
	return Runs(seq, len(prior))
}

// Runs returns, for each offset of the part of seq after its first n+1
// entries (a separator that equals no other entry at n), how many entries
// of seq's first n, from its first, repeat from that offset on: the
// Z-function of seq, linear in its length. Align numbers a client's
// history, a separator and the stored messages so.
func Runs(seq []int, n int) []int {
	// z[i] is the length of the longest common prefix of seq and seq[i:];
	// [l, r) is the rightmost match found so far.
	z := make([]int, len(seq))
	for i, l, r := 1, 0, 0; i < len(seq); i++ {
		if i < r {
			z[i] = min(r-i, z[i-l])
		}
		for i+z[i] < len(seq) && seq[z[i]] == seq[i+z[i]] {
			z[i]++
		}
		if i+z[i] > r {
			l, r = i, i+z[i]
		}
	}
	return z[n+1:]
}

// ResendsRest reports whether sent, a client's history whose first message
// differs from its stored conversation's, resends the rest as stored: its
// messages 1 to n-1 are each the stored one at that position (stored(i)),
// at least two of them, and one is a user's message with text (a reply,
// or a tool call's empty text, repeats across chats more readily than what
// a user says). It is the bar an edit of a named conversation's first
// message meets before its save supersedes the branch from there
// (internal/store/contract), and the prompt of the request carrying it
// leaves out the summary of the old text (internal/engine/prompt); another
// chat sent under the same name, opening with the same greeting reply,
// does not meet it.
func ResendsRest(sent []Message, n int, stored func(i int) bool) bool {
	if n < 3 || n > len(sent) {
		return false
	}
	said := false
	for i := 1; i < n; i++ {
		if !stored(i) {
			return false
		}
		said = said || sent[i].Role == "user" && strings.TrimSpace(sent[i].Content) != ""
	}
	return said
}
