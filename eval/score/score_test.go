package score

import (
	"strings"
	"testing"

	"github.com/memgate/memgate/eval/synth"
)

func TestJudge(t *testing.T) {
	city := synth.Probe{Category: synth.Changed, Question: "Which city do I live in these days?", Want: "Porto", Stale: []string{"Lisbon"}}
	rent := synth.Probe{Category: synth.Numbers, Question: "How much do I pay in rent each month?", Want: "1,240"}
	sys := Message{"system", "You are a helpful assistant."}
	tests := []struct {
		name           string
		probe          synth.Probe
		prompt         []Message
		covered, stale bool
	}{
		{"verbatim turn", rent, []Message{sys, {"user", "My rent is €1,240 a month."}, {"assistant", "Ok."}, {"user", rent.Question}}, true, false},
		{"absent", rent, []Message{sys, {"user", "Tell me about owls."}, {"user", rent.Question}}, false, false},
		{"longer number is not the value", rent, []Message{sys, {"user", "It cost 11,240 in the end."}, {"user", rent.Question}}, false, false},
		{"only in the question is not evidence", synth.Probe{Category: synth.Names, Want: "Ana"}, []Message{sys, {"user", "Is Ana my sister?"}}, false, false},
		{"in a summary", rent, []Message{sys, {"system", "Summary of earlier conversation:\nThe user said: My rent is €1,240 a month."}, {"user", rent.Question}}, true, false},
		{"changed: new only", city, []Message{sys, {"user", "I moved to Porto last month."}, {"user", city.Question}}, true, false},
		{"changed: old only is stale", city, []Message{sys, {"user", "I live in Lisbon."}, {"user", city.Question}}, false, true},
		{"changed: both in history is not stale", city, []Message{sys, {"user", "I live in Lisbon."}, {"assistant", "Nice."}, {"user", "I moved to Porto."}, {"user", city.Question}}, true, false},
		{"changed: neither", city, []Message{sys, {"user", city.Question}}, false, false},
		{"changed: old presented as a current fact", city, []Message{
			sys, {"system", "Facts about the user:\n- city: Lisbon\n- city: Porto\n\nRecalled:\n- I moved to Porto."}, {"user", city.Question}}, true, true},
		{"changed: old marked superseded in facts", city, []Message{
			sys, {"system", "Facts about the user:\n- city: Porto\n- city: Lisbon (superseded)"}, {"user", city.Question}}, true, false},
		{"changed: old in recalled passages, new as fact", city, []Message{
			sys, {"system", "## Facts\n- city: Porto\n\n## Recalled passages\n- [2026-01-05] I live in Lisbon."}, {"user", city.Question}}, true, false},
		{"changed: old fact in a section after a heading", city, []Message{
			sys, {"system", "Known facts:\n- lives in Lisbon\nRecent summary:\nmoved to Porto"}, {"user", city.Question}}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Judge(tt.probe, tt.prompt, 42)
			if o.Covered != tt.covered || o.Stale != tt.stale {
				t.Fatalf("covered=%v stale=%v, want covered=%v stale=%v", o.Covered, o.Stale, tt.covered, tt.stale)
			}
			if o.Tokens != 42 || o.Category != tt.probe.Category || o.Changed != (len(tt.probe.Stale) > 0) {
				t.Fatalf("outcome %+v", o)
			}
		})
	}
}

func TestTally(t *testing.T) {
	var tl Tally
	for _, o := range []Outcome{
		{Category: synth.Numbers, Covered: true, Tokens: 100},
		{Category: synth.Numbers, Covered: false, Tokens: 200},
		{Category: synth.Changed, Covered: true, Changed: true, Tokens: 300},
		{Category: synth.Changed, Covered: false, Changed: true, Stale: true, Tokens: 400},
	} {
		tl.Add(o)
	}
	if c, ok := tl.Coverage(synth.Numbers); !ok || c != 0.5 {
		t.Errorf("numbers coverage = %v %v", c, ok)
	}
	if _, ok := tl.Coverage(synth.Dates); ok {
		t.Error("dates coverage reported without probes")
	}
	if got := tl.Overall(); got != 0.5 {
		t.Errorf("overall = %v", got)
	}
	if s, ok := tl.StaleRate(); !ok || s != 0.5 {
		t.Errorf("stale = %v %v", s, ok)
	}
	if m := tl.MeanTokens(); m != 250 {
		t.Errorf("mean tokens = %v", m)
	}
}

func TestSources(t *testing.T) {
	block := "<memory>\nWhat memgate remembers.\n\nPinned — the user's standing goals:\n- I moved to Porto.\n\nSummary of the earlier conversation:\nThe user lives in Porto.\n\nFacts about the user:\n- profile: Porto\n\nRecalled from earlier messages:\n- [2026-01-05, conversation c1] I moved to Porto.\n</memory>"
	tests := []struct {
		name   string
		prompt []Message
		want   []string
	}{
		{"every block section", []Message{{"system", "app"}, {"system", block}, {"user", "where do I live?"}}, []string{"pinned", "summary", "facts", "recalled"}},
		{"turn", []Message{{"system", "app"}, {"user", "I moved to Porto."}, {"assistant", "ok"}, {"user", "where?"}}, []string{"turn"}},
		{"unlabelled block", []Message{{"system", "<memory>\nlives in Porto\n</memory>"}, {"user", "where?"}}, []string{"memory"}},
		{"not covered", []Message{{"system", "app"}, {"user", "where?"}}, nil},
	}
	p := synth.Probe{Category: synth.Changed, Want: "Porto"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Judge(p, tt.prompt, 1).Sources
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("sources %v, want %v", got, tt.want)
			}
		})
	}
}
