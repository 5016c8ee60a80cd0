package memory

import (
	"fmt"
	"testing"
)

// history returns n alternating user and assistant messages.
func digestHistory(n int) []Message {
	out := make([]Message, n)
	for i := range out {
		out[i] = Message{Role: []string{"user", "assistant"}[i%2], Content: fmt.Sprint("message ", i)}
	}
	return out
}

// TestDigests: the digest of a history's prefix is the XOR of its
// messages' leaves at their positions among the non-system messages; a
// change, a deletion or a move changes the digests from its position on,
// and none before it.
func TestDigests(t *testing.T) {
	h := digestHistory(40)
	with := append([]Message{{Role: "system", Content: "be brief"}}, h[:20]...)
	with = append(append(with, Message{Role: "developer", Content: "x"}), h[20:]...)
	d := Digests(with, len(with))
	if short := Digests(with, 7); len(short) != 7 || short[6] != d[6] {
		t.Fatal("the digests of a history's first 7 messages are not its first 7 digests")
	}
	if len(d) != len(h) {
		t.Fatalf("%d digests of %d non-system messages", len(d), len(h))
	}
	var want Digest
	for i, m := range h {
		want = want.Xor(Leaf(i, m))
		if d[i] != want {
			t.Fatalf("digest %d is not the XOR of the leaves through it", i)
		}
	}
	edited := append([]Message(nil), h...)
	edited[25].Content = "rewritten"
	deleted := append(append([]Message(nil), h[:25]...), h[26:]...)
	swapped := append([]Message(nil), h...)
	swapped[25], swapped[26] = swapped[26], swapped[25]
	for name, changed := range map[string][]Message{"edited": edited, "deleted": deleted, "swapped": swapped} {
		got := Digests(changed, len(changed))
		for i := range got {
			if same := got[i] == d[i]; same != (i < 25) {
				t.Fatalf("%s at 25: digest %d same=%v", name, i, same)
			}
		}
	}
}

// TestStamps: the messages an exchange stores are stamped with their
// positions in the client's history and its digests through them — a cut
// history's with the digest of what the cut left out (Gap), without it
// none past the gap — and one that resends no history has none.
func TestStamps(t *testing.T) {
	const keep = 10
	h := digestHistory(BranchHead + keep + 30)
	turn, reply := Message{Role: "user", Content: "q"}, Message{Role: "assistant", Content: "a"}
	full := Digests(append(append(append([]Message(nil), h...), turn), reply), len(h)+2)
	cut, skipped := CutHistory(h, keep)
	gap := full[BranchHead+skipped-1].Xor(full[BranchHead-1])
	check := func(name string, ex Exchange, stored int, known bool) {
		t.Helper()
		sts := Stamps(ex, stored)
		for k, st := range sts {
			pos := len(full) - stored + k
			if st.Known != known || known && (st.Pos != pos || st.Digest != full[pos]) {
				t.Fatalf("%s: stamp %d is %+v, want known=%v at %d", name, k, st, known, pos)
			}
		}
	}
	check("whole", Exchange{Prior: h, Turn: []Message{turn}, Reply: reply}, 5, true)
	check("cut", Exchange{Prior: cut, Skipped: skipped, Gap: &gap, Turn: []Message{turn}, Reply: reply}, keep+2, true)
	check("cut without its gap", Exchange{Prior: cut, Skipped: skipped, Turn: []Message{turn}, Reply: reply}, 2, false)
	if sts := Stamps(Exchange{Turn: []Message{turn}, Reply: reply}, 2); sts[0].Known || sts[1].Known {
		t.Fatal("a newest-only exchange's messages are stamped")
	}
}

// BenchmarkDigests takes the digests of the part of a 60,000-message
// history (messages of about 300 bytes: 18 MB of text) that a cut at the
// default bound of 2,000 leaves out, with its first BranchHead: what the
// Capturer hashes once per request of such a chat (record's checkResent).
func BenchmarkDigests(b *testing.B) {
	msgs := make([]Message, 60000)
	for i := range msgs {
		msgs[i] = Message{Role: []string{"user", "assistant"}[i%2], Content: fmt.Sprintf("%0300d", i)}
	}
	b.SetBytes(int64(300 * (len(msgs) - 2000)))
	b.ReportAllocs()
	for b.Loop() {
		Digests(msgs, len(msgs)-2000)
	}
}

// BenchmarkStamps stamps the two messages a save of a cut history's next
// turn stores (the history cut at the default 2,000, messages of about
// 300 bytes): the hash pass over the exchange a save makes.
func BenchmarkStamps(b *testing.B) {
	msgs := make([]Message, 60000)
	for i := range msgs {
		msgs[i] = Message{Role: []string{"user", "assistant"}[i%2], Content: fmt.Sprintf("%0300d", i)}
	}
	var gap Digest
	ex := Exchange{Turn: []Message{{Role: "user", Content: "q"}}, Reply: Message{Role: "assistant", Content: "a"}, Gap: &gap}
	ex.Prior, ex.Skipped = CutHistory(msgs, 2000)
	b.ReportAllocs()
	for b.Loop() {
		Stamps(ex, 2)
	}
}

// TestStampsOfACutTurn: an exchange whose turn was cut (TurnSkipped) stamps
// its history and the turn's first BranchHead messages at their positions
// in the client's history, and nothing past the turn's gap, whose
// positions and digests it does not know.
func TestStampsOfACutTurn(t *testing.T) {
	const keep = 10
	prior := digestHistory(6)
	turn := make([]Message, BranchHead+keep+30)
	for i := range turn {
		turn[i] = Message{Role: "user", Content: fmt.Sprint("t", i)}
	}
	reply := Message{Role: "assistant", Content: "a"}
	full := Digests(append(append(append([]Message(nil), prior...), turn...), reply), len(prior)+len(turn)+1)
	cut, skipped := CutHistory(turn, keep)
	ex := Exchange{Prior: prior, Turn: cut, TurnSkipped: skipped, Reply: reply}
	stored := len(cut) + 1
	sts := Stamps(ex, stored)
	for k, st := range sts {
		switch {
		case k < BranchHead:
			pos := len(prior) + k
			if !st.Known || st.Pos != pos || st.Digest != full[pos] {
				t.Fatalf("stamp of the turn's message %d is %+v, want known at %d", k, st, pos)
			}
		case st.Known:
			t.Fatalf("stamp %d, past the turn's gap, is %+v, want none", k, st)
		}
	}
}
