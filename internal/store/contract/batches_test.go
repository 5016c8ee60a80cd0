package contract

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

func TestChunksAndRowBatches(t *testing.T) {
	tests := []struct {
		n          int
		chunks     []int // sizes Chunks gives for 7 items
		rowBatches []int // sizes RowBatches gives for 7 items
	}{
		{n: 3, chunks: []int{3, 3, 1}, rowBatches: []int{3, 3, 1}},
		{n: 4, chunks: []int{4, 3}, rowBatches: []int{4, 1, 1, 1}},
		{n: 8, chunks: []int{7}, rowBatches: []int{1, 1, 1, 1, 1, 1, 1}},
	}
	xs := []int{0, 1, 2, 3, 4, 5, 6}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.n), func(t *testing.T) {
			for name, run := range map[string]func([]int, int, func([]int) error) error{
				"Chunks": Chunks[int], "RowBatches": RowBatches[int],
			} {
				var sizes, seen []int
				if err := run(xs, tt.n, func(b []int) error {
					sizes, seen = append(sizes, len(b)), append(seen, b...)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				want := tt.chunks
				if name == "RowBatches" {
					want = tt.rowBatches
				}
				if !slices.Equal(sizes, want) || !slices.Equal(seen, xs) {
					t.Errorf("%s(7 items, %d): sizes %v, items %v; want sizes %v, every item in order", name, tt.n, sizes, seen, want)
				}
			}
		})
	}
	stop := errors.New("stop")
	calls := 0
	if err := Chunks(xs, 2, func([]int) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
		t.Errorf("Chunks after an error: err %v after %d calls; want stop after 1", err, calls)
	}
}

// TestReadItemChecksBatchesKeys checks that ReadItemChecks names each
// distinct key once, at most CheckKeys per query, and looks up as moved
// only the keys its conversation no longer holds.
func TestReadItemChecksBatchesKeys(t *testing.T) {
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: memory.DefaultConversation}
	var items []memory.Item
	for i := range CheckKeys + 10 {
		it := memory.Item{Tenant: id.Tenant, User: id.User, Conversation: id.Conversation, Kind: "message", Ref: fmt.Sprint("k", i)}
		items = append(items, it, it) // each key twice
	}
	var stored, live []int
	c, err := ReadItemChecks(items, ItemCheckSQL{
		Stored: func(_ memory.Identity, keys []string, fn func(string, bool)) error {
			stored = append(stored, len(keys))
			for _, k := range keys[1:] { // all but the first of each batch stayed
				fn(k, k == "k1")
			}
			return nil
		},
		Live: func(_ memory.Identity, keys []string, fn func(key, conv string)) error {
			live = append(live, len(keys))
			fn(keys[0], "c2")
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{CheckKeys, 10}; !slices.Equal(stored, want) {
		t.Errorf("stored queries %v; want %v", stored, want)
	}
	if want := []int{1, 1}; !slices.Equal(live, want) {
		t.Errorf("live queries %v; want %v (the one missing key of each batch)", live, want)
	}
	if !c.Superseded[Source{id, "k1"}] || len(c.Superseded) != 1 {
		t.Errorf("Superseded = %v; want k1 alone", c.Superseded)
	}
	want := map[Source]string{{id, "k0"}: "c2", {id, fmt.Sprint("k", CheckKeys)}: "c2"}
	if len(c.Moved) != len(want) || c.Moved[Source{id, "k0"}] != "c2" || c.Moved[Source{id, fmt.Sprint("k", CheckKeys)}] != "c2" {
		t.Errorf("Moved = %v; want %v", c.Moved, want)
	}
}
