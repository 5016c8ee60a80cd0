package memory

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// alignNaive is Align as first written: a run extended from every offset
// of stored in turn. TestAlignMatchesNaive holds Align to it.
func alignNaive(stored, prior []Message) Plan {
	if len(prior) == 0 {
		return Plan{}
	}
	bestOff, bestLen := -1, 0
	for off := range stored {
		n := 0
		for n < len(prior) && off+n < len(stored) && stored[off+n].Fingerprint() == prior[n].Fingerprint() {
			n++
		}
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

func TestAlignMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	roles := []string{"user", "assistant", "tool"}
	texts := []string{"ok", "sure", "a", "b", ""}
	gen := func(n int) []Message {
		out := make([]Message, n)
		for i := range out {
			out[i] = Message{Role: roles[r.IntN(2+i%2)], Content: texts[r.IntN(len(texts))], Seq: int64(2*i + 1)}
		}
		return out
	}
	for range 5000 {
		stored, prior := gen(r.IntN(12)), gen(r.IntN(12))
		if r.IntN(2) == 0 && len(stored) > 0 { // a prior that starts inside stored
			at := r.IntN(len(stored))
			prior = append(append([]Message(nil), stored[at:]...), prior...)
		}
		got, want := Align(stored, prior), alignNaive(stored, prior)
		if got.SupersedeFrom != want.SupersedeFrom || len(got.Prior) != len(want.Prior) {
			t.Fatalf("Align(%v, %v) = %+v, want %+v", stored, prior, got, want)
		}
	}
}

// TestAlignRepetitiveHistoryIsLinear: a history repeating one exchange
// thousands of times (a client can send one in a few hundred KB) aligns in
// work linear in its length. Extended from every offset, its runs cost
// the product of the lengths: at 20,000 messages, seconds of a core in
// the capture lane for one request, on every retry.
func TestAlignRepetitiveHistoryIsLinear(t *testing.T) {
	const n = 2000
	// Texts longer than the 32 bytes a string concatenation may build on
	// the stack, so a fingerprint made per comparison shows as allocations.
	a, b := strings.Repeat("a", 40), strings.Repeat("b", 40)
	var stored, prior []Message
	for i := range n {
		m := Message{Role: "user", Content: a, Seq: int64(i + 1)}
		if i%2 == 1 {
			m.Role, m.Content = "assistant", b
		}
		stored = append(stored, m)
		prior = append(prior, Message{Role: m.Role, Content: m.Content})
	}
	prior = append(prior, Message{Role: "user", Content: a})
	var p Plan
	allocs := testing.AllocsPerRun(3, func() { p = Align(stored, prior) })
	if p.SupersedeFrom != 0 || len(p.Prior) != 1 {
		t.Fatalf("plan = %+v, want the one new message and nothing superseded", p)
	}
	// A fingerprint per message and the map and slices: linear. The naive
	// runs allocate a fingerprint per comparison, about n²/2.
	if limit := 4.0 * float64(len(stored)+len(prior)); allocs > limit {
		t.Errorf("Align allocated %.0f times for %d messages, over %.0f: not linear", allocs, len(stored)+len(prior), limit)
	}
}

func BenchmarkAlignRepetitive(b *testing.B) {
	const n = 20000
	var stored, prior []Message
	for i := range n {
		m := Message{Role: "user", Content: "a", Seq: int64(i + 1)}
		if i%2 == 1 {
			m.Role, m.Content = "assistant", "b"
		}
		stored = append(stored, m)
		prior = append(prior, Message{Role: m.Role, Content: m.Content})
	}
	for b.Loop() {
		Align(stored, prior)
	}
}

// TestResendsRest: the bar a changed first message's history meets.
func TestResendsRest(t *testing.T) {
	msg := func(role, content string) Message { return Message{Role: role, Content: content} }
	stored := []Message{msg("user", "hi"), msg("assistant", "Hello! How can I help?"), msg("user", "plan my trip"), msg("assistant", "sure")}
	for _, tc := range []struct {
		name string
		sent []Message
		want bool
	}{
		{"the rest resent", []Message{msg("user", "hey"), stored[1], stored[2], stored[3]}, true},
		{"the reply and a user message", []Message{msg("user", "hey"), stored[1], stored[2]}, true},
		{"only the reply", []Message{msg("user", "hey"), stored[1]}, false},
		{"no user words among them", []Message{msg("user", "hey"), stored[1], stored[3]}, false},
		{"a later message otherwise", []Message{msg("user", "hey"), stored[1], msg("user", "another trip")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// By role and text, position aside: the case "no user words
			// among them" resends two replies only.
			same := func(i int) bool {
				return slices.ContainsFunc(stored, func(m Message) bool { return m.Fingerprint() == tc.sent[i].Fingerprint() })
			}
			if got := ResendsRest(tc.sent, len(tc.sent), same); got != tc.want {
				t.Fatalf("ResendsRest = %v, want %v", got, tc.want)
			}
		})
	}
}
