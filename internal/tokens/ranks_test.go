package tokens

import (
	"testing"

	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

func TestRankTable(t *testing.T) {
	tests := []struct {
		name  string
		ranks map[string]int
		miss  []string
	}{
		{"small", map[string]int{"a": 0, "b": 1, "ab": 2, "abc": 3, " the": 4}, []string{"", "c", "abcd", "the", "A"}},
		{"binary", map[string]int{"\x00": 7, "\xff\xfe": 8, "\x00\x00": 9}, []string{"\x01", "\xff"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab, err := newRankTable(tt.ranks)
			if err != nil {
				t.Fatal(err)
			}
			for tok, want := range tt.ranks {
				if got, ok := tab.get(tok); !ok || got != want {
					t.Errorf("get(%q) = %d, %v; want %d, true", tok, got, ok, want)
				}
			}
			for _, tok := range tt.miss {
				if got, ok := tab.get(tok); ok {
					t.Errorf("get(%q) = %d, true; want absent", tok, got)
				}
			}
		})
	}
	for _, bad := range []map[string]int{{"": 1}, {"x": -1}} {
		if _, err := newRankTable(bad); err == nil {
			t.Errorf("newRankTable(%v) succeeded", bad)
		}
	}
}

// Every rank of the real encodings survives the move into the table.
func TestRankTableHoldsEncodings(t *testing.T) {
	for _, name := range []string{O200kBase, CL100kBase} {
		t.Run(name, func(t *testing.T) {
			ranks, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(name + ".tiktoken")
			if err != nil {
				t.Fatal(err)
			}
			tab, err := newRankTable(ranks)
			if err != nil {
				t.Fatal(err)
			}
			for tok, want := range ranks {
				if got, ok := tab.get(tok); !ok || got != want {
					t.Fatalf("get(%q) = %d, %v; want %d", tok, got, ok, want)
				}
			}
		})
	}
}
