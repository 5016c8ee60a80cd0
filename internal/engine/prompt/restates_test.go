package prompt

import (
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

func TestRestates(t *testing.T) {
	pinned := []memory.Fact{{Key: "i want to save r 5 000 by june", Value: "I want to save R$ 5.000 by June.", Pinned: true}}
	tests := []struct {
		value string
		want  bool
	}{
		{"I want to save R$ 5.000 by June", true},  // same statement, other key
		{"save R$ 5.000 by June", true},            // contained
		{"I want to save R$ 6.000 by July", false}, // different
		{"", false},
	}
	for _, tt := range tests {
		if got := restates(pinned, memory.Fact{Key: "savings_goal", Value: tt.value}); got != tt.want {
			t.Errorf("restates(%q) = %v, want %v", tt.value, got, tt.want)
		}
	}
}
