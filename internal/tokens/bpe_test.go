package tokens

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/memgate/memgate/bench/pathological"
)

// mustEncodings returns the two encodings.
func mustEncodings(tb testing.TB) []*encoding {
	tb.Helper()
	encs, err := encodings()
	if err != nil {
		tb.Fatal(err)
	}
	return []*encoding{encs[O200kBase], encs[CL100kBase]}
}

// scanCount is the scanning merge over any piece, however long: the
// heap's oracle.
func (e *encoding) scanCount(piece string) int {
	if _, ok := e.ranks.get(piece); ok {
		return 1
	}
	starts := make([]int, 0, len(piece)+1)
	for k := 0; k <= len(piece); k++ {
		starts = append(starts, k)
	}
	for len(starts) > 2 {
		best, at := -1, -1
		for k := 0; k+2 < len(starts); k++ {
			if r, ok := e.ranks.get(piece[starts[k]:starts[k+2]]); ok && (at < 0 || r < best) {
				best, at = r, k
			}
		}
		if at < 0 {
			break
		}
		starts = append(starts[:at+1], starts[at+2:]...)
	}
	return len(starts) - 1
}

// The heap merge leaves as many parts as the scanning merge on pieces of
// every length, random and repetitive.
func TestMergeHeapMatchesScan(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	alphabets := []string{"ab", "abcdefghijklmnopqrstuvwxyz", "aaaaab", " ", "!?.-", "0123456789", "eyJ-"}
	for _, e := range mustEncodings(t) {
		for _, a := range alphabets {
			for _, n := range []int{2, 3, 7, 64, 65, 66, 130, 500, 1200} {
				var b strings.Builder
				for range n {
					b.WriteByte(a[r.IntN(len(a))])
				}
				piece := b.String()
				want := e.scanCount(piece)
				if got, _ := e.mergeHeap(piece); got != want {
					t.Errorf("%s: %q: heap %d parts, scan %d", e.name, piece, got, want)
				}
			}
		}
	}
}

// Counting makes at most three rank lookups per byte of text, whatever
// the text: the work of every hostile input is linear in its length.
func TestCountWorkIsLinear(t *testing.T) {
	// 48 KB long texts: pieces hundreds of times longer than the scanning
	// merge's, where a quadratic merge would make thousands of lookups a
	// byte.
	inputs := pathological.Sized(48 << 10)
	inputs = append(inputs, pathological.Input{Name: "ordinary", Text: strings.Repeat("The quick brown fox jumps over the lazy dog. ", 1000)})
	for _, e := range mustEncodings(t) {
		for _, in := range inputs {
			t.Run(e.name+"/"+in.Name, func(t *testing.T) {
				tokens, lookups := e.countWork(in.Text)
				if tokens <= 0 || tokens > len(in.Text) {
					t.Fatalf("%d tokens for %d bytes", tokens, len(in.Text))
				}
				if lookups > 3*len(in.Text) {
					t.Errorf("%d rank lookups for %d bytes: more than 3 per byte", lookups, len(in.Text))
				}
				// Twice the text, twice the work (not four times).
				_, twice := e.countWork(in.Text + " " + in.Text)
				if twice > 2*lookups+8 {
					t.Errorf("doubling the text took the lookups from %d to %d", lookups, twice)
				}
			})
		}
	}
}

// A long piece's scratch space comes from the pool: counting a long piece
// again allocates nothing.
func TestMergeHeapReusesScratch(t *testing.T) {
	e := mustEncodings(t)[0]
	piece := strings.Repeat("qz", 2000)
	e.mergeHeap(piece)
	if allocs := testing.AllocsPerRun(20, func() { e.mergeHeap(piece) }); allocs > 1 {
		t.Errorf("%.1f allocations per long piece", allocs)
	}
}

// BenchmarkCount counts texts without the memo: English prose (the
// ordinary case) and each hostile input of the corpus, under o200k_base.
func BenchmarkCount(b *testing.B) {
	e := mustEncodings(b)[0]
	inputs := append([]pathological.Input{{Name: "prose",
		Text: strings.Repeat("The quick brown fox jumps over the lazy dog while the committee reviews the budget. ", 64)}},
		pathological.Inputs()...)
	for _, in := range inputs {
		b.Run(in.Name, func(b *testing.B) {
			b.SetBytes(int64(len(in.Text)))
			b.ReportAllocs()
			for b.Loop() {
				e.count(in.Text)
			}
		})
	}
}
