package seen

import "testing"

func TestSetForgetsOldestBeyondMax(t *testing.T) {
	s := &Set{Max: 2}
	s.Add("a")
	s.Add("b")
	s.Add("a") // already there: not re-ordered, not counted twice
	s.Add("c")
	for key, want := range map[string]bool{"a": false, "b": true, "c": true, "d": false} {
		if got := s.Has(key); got != want {
			t.Errorf("Has(%q) = %v, want %v", key, got, want)
		}
	}
}
