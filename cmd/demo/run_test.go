package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestDemoRemembersWhatTheScriptSays plays the demo against the real
// gateway (built from this tree) and reads its printout: by the last
// question the memory block the upstream received pins the savings goal
// stated in session 1 and the city as it changed in session 2, and the
// user's facts hold them. Each turn waits for the gateway's after-save
// work (indexing, then fact extraction and compaction in the side lane),
// as a user pausing between turns would give it time to.
func TestDemoRemembersWhatTheScriptSays(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway")
	}
	var out, errs bytes.Buffer
	if err := run(context.Background(), []string{"demo"}, &out, &errs); err != nil {
		t.Fatalf("demo: %v\n%s", err, errs.String())
	}
	text := out.String()
	last := strings.Index(text, "user › How much did I want to save")
	facts := strings.Index(text, "Facts memgate holds")
	if last < 0 || facts < last {
		t.Fatalf("demo printout has no last question or facts:\n%s", text)
	}
	prompt, held := text[last:facts], text[facts:]
	pinned, ok := between(prompt, "Pinned", "</memory>")
	if !ok {
		t.Fatalf("the last question's prompt has no pinned part:\n%s", prompt)
	}
	for _, want := range []string{"R$ 5.000 by June", "city: Porto", "name: Marta"} {
		if !strings.Contains(pinned, want) {
			t.Errorf("the last question's pinned part lacks %q:\n%s", want, pinned)
		}
	}
	if !strings.Contains(prompt, "[2026-03-02, conversation demo-s1]") {
		t.Errorf("the last question's recalled passages are not dated as said in session 1:\n%s", prompt)
	}
	if strings.Contains(pinned, "Lisbon") {
		t.Errorf("the last question's pinned part still has the old city:\n%s", pinned)
	}
	for _, want := range []string{"city: Porto (pinned)", "name: Marta (pinned)", "R$ 5.000 by June for a trip to Japan. (pinned)"} {
		if !strings.Contains(held, want) {
			t.Errorf("the user's facts lack %q:\n%s", want, held)
		}
	}
}

// TestScriptDatesAreReal checks each session's weekday against its date.
func TestScriptDatesAreReal(t *testing.T) {
	for _, s := range script {
		d, err := s.day()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(s.when, d.Weekday().String()+" ") {
			t.Errorf("session %q: %s %d is a %s", s.when, d.Format("2 January"), scriptYear, d.Weekday())
		}
	}
}

// between returns the text of s from the first from up to the next to.
func between(s, from, to string) (string, bool) {
	i := strings.Index(s, from)
	if i < 0 {
		return "", false
	}
	j := strings.Index(s[i:], to)
	if j < 0 {
		return "", false
	}
	return s[i : i+j], true
}
