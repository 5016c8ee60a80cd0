package ui

import (
	"testing"
	"time"
)

// TestSessionLifetime: a session slides with use but ends at its absolute
// lifetime however busy it is (finding 9), and ends after its idle timeout
// unused.
func TestSessionLifetime(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	s := newSessions(time.Hour, 3*time.Hour, 10, clock)

	busy := s.create("k")
	for i := 0; i < 20; i++ { // used every 10 minutes for 3h20m
		now = now.Add(10 * time.Minute)
		got := s.get(busy.id)
		if past := now.Sub(busy.ends) >= 0; past != (got == nil) {
			t.Fatalf("at +%v: session live=%v, past its end=%v", time.Duration(i+1)*10*time.Minute, got != nil, past)
		}
	}
	if s.get(busy.id) != nil {
		t.Fatal("a busy session outlived its absolute lifetime")
	}

	idle := s.create("k")
	now = now.Add(59 * time.Minute)
	if s.get(idle.id) == nil {
		t.Fatal("session ended before its idle timeout")
	}
	now = now.Add(time.Hour)
	if s.get(idle.id) != nil {
		t.Fatal("session outlived its idle timeout")
	}
}
