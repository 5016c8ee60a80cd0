package score

import (
	"math"
	"testing"
	"time"

	"github.com/memgate/memgate/eval/synth"
)

// conv is a two-session conversation of 600 turns with evidence at depths
// 600 and 50.
func conv() synth.Conversation {
	c := synth.Conversation{Names: [2]string{"Maya", "Leo"}}
	for _, d := range []time.Time{time.Date(2023, 3, 4, 10, 0, 0, 0, time.UTC), time.Date(2023, 5, 14, 9, 0, 0, 0, time.UTC)} {
		sess := synth.Session{Date: d}
		for i := range 300 {
			sess.Turns = append(sess.Turns, synth.Turn{Speaker: i % 2, Text: "Thanks, Leo!"})
		}
		c.Sessions = append(c.Sessions, sess)
	}
	c.Sessions[0].Turns[0].Text = "Hey Leo, we finally named the new puppy Biscuit."
	c.Sessions[1].Turns[250].Text = "Leo! I ran my first 10k race yesterday."
	return c
}

func TestJudge(t *testing.T) {
	c := conv()
	puppy := synth.Question{Type: synth.SingleHop, Text: "What did Maya name the new puppy?",
		Evidence: []synth.Evidence{{Ref: synth.Ref{Session: 0, Turn: 0}, Key: "we finally named the new puppy Biscuit"}}}
	race := synth.Question{Type: synth.Temporal, Text: "When did Maya run her first 10k race?",
		Evidence: []synth.Evidence{{Ref: synth.Ref{Session: 1, Turn: 250}, Key: "I ran my first 10k race yesterday"}}}
	sys := Message{"system", "You are a helpful assistant."}
	tests := []struct {
		name           string
		q              synth.Question
		prompt         []Message
		covered, dated bool
		depth          int
	}{
		{"verbatim turn", puppy, []Message{sys, {"user", "Hey Leo, we finally named the new puppy Biscuit."}, {"user", puppy.Text}}, true, false, 600},
		{"recalled passage, other punctuation", puppy, []Message{{"system", "Recalled:\n- [2023-03-04] Maya: we finally named the new puppy  Biscuit!"}, {"user", puppy.Text}}, true, false, 600},
		{"absent", puppy, []Message{sys, {"user", "Thanks, Leo!"}, {"user", puppy.Text}}, false, false, 600},
		{"only part of the clause", puppy, []Message{sys, {"assistant", "we finally named the new puppy"}, {"user", puppy.Text}}, false, false, 600},
		{"only in the question is not evidence", puppy, []Message{sys, {"user", "we finally named the new puppy Biscuit?"}}, false, false, 600},
		{"temporal without its date", race, []Message{sys, {"user", "Leo! I ran my first 10k race yesterday."}, {"user", race.Text}}, true, false, 50},
		{"temporal with its ISO date", race, []Message{{"system", "[2023-05-14] Maya: I ran my first 10k race yesterday."}, {"user", race.Text}}, true, true, 50},
		{"temporal with a spelled date", race, []Message{{"system", "On May 14, 2023 Maya said: I ran my first 10k race yesterday."}, {"user", race.Text}}, true, true, 50},
		{"temporal with another session's date", race, []Message{{"system", "[2023-03-04] I ran my first 10k race yesterday."}, {"user", race.Text}}, true, false, 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Judge(c, tt.q, tt.prompt)
			if len(got) != 1 {
				t.Fatalf("%d outcomes, want 1", len(got))
			}
			o := got[0]
			if o.Covered != tt.covered || o.Dated != tt.dated || o.Depth != tt.depth || o.Type != tt.q.Type {
				t.Fatalf("outcome %+v, want covered %v dated %v depth %d", o, tt.covered, tt.dated, tt.depth)
			}
		})
	}
}

func TestTally(t *testing.T) {
	var tl Tally
	tl.Add([]Outcome{{Type: synth.MultiHop, Depth: 450, Covered: true}, {Type: synth.MultiHop, Depth: 40, Covered: false}}, 3000)
	tl.Add([]Outcome{{Type: synth.Temporal, Depth: 150, Covered: true, Dated: false}}, 1000)
	tl.Add([]Outcome{{Type: synth.Temporal, Depth: 301, Covered: true, Dated: true}}, 2000)
	eq := func(name string, got float64, ok bool, want float64) {
		t.Helper()
		if !ok || math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v (%v), want %v", name, got, ok, want)
		}
	}
	eq("overall", tl.Overall(), true, 0.75)
	v, ok := tl.Type(synth.MultiHop)
	eq("multi-hop", v, ok, 0.5)
	v, ok = tl.Depth(Deep)
	eq("300+", v, ok, 1)
	v, ok = tl.Depth(Recent)
	eq("0–100", v, ok, 0)
	v, ok = tl.Dated()
	eq("dated", v, ok, 0.5)
	eq("mean tokens", tl.MeanTokens(), true, 2000)
	if _, ok := tl.Type(synth.Paraphrase); ok {
		t.Error("paraphrase reported without any question")
	}
	if tl.Evidence() != 4 {
		t.Errorf("evidence = %d, want 4", tl.Evidence())
	}
}

func TestBucket(t *testing.T) {
	for d, want := range map[int]string{1: Recent, 100: Recent, 101: Middle, 300: Middle, 301: Deep, 640: Deep} {
		if got := Bucket(d); got != want {
			t.Errorf("Bucket(%d) = %s, want %s", d, got, want)
		}
	}
}
