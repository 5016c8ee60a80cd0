package prompt

import (
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

func TestRecallText(t *testing.T) {
	reply := "I can book the Lisbon flight for Friday or Saturday."
	for _, tc := range []struct {
		turn string
		join bool // the recall query is the reply, then the turn
	}{
		{"yes please", true},
		{"why?", true},
		{"what did she say?", true},
		{"how much does it cost?", true},
		{"Can you elaborate?", true},
		{"Quanto custa isso?", true},
		{"When did Ana run a charity race?", false},
		{"Where is my passport renewal form?", false},
		{"Quando a Ana correu a maratona?", false},
		{"Tell me everything you know about my trip to Lisbon in May.", false}, // not short
	} {
		got := recallText([]memory.Message{
			{Role: "user", Content: "hi"},
			{Role: "assistant", Content: reply},
			{Role: "user", Content: tc.turn},
		})
		want := tc.turn
		if tc.join {
			want = reply + "\n" + tc.turn
		}
		if got != want {
			t.Errorf("recallText(… %q) = %q, want %q", tc.turn, got, want)
		}
	}
}
