package main

import (
	"strings"
	"testing"

	"github.com/memgate/memgate/eval/score"
	"github.com/memgate/memgate/eval/synth"
)

// tallyOf returns a tally with covered of n probes covered and stale of
// changed changed-fact probes stale.
func tallyOf(covered, n, stale, changed int) *score.Tally {
	t := &score.Tally{}
	for i := range n {
		t.Add(score.Outcome{Category: synth.Numbers, Covered: i < covered, Tokens: 100})
	}
	for i := range changed {
		t.Add(score.Outcome{Category: synth.Changed, Covered: true, Changed: true, Stale: i < stale, Tokens: 100})
	}
	return t
}

func TestTargetCheck(t *testing.T) {
	tests := []struct {
		name    string
		mem, tr *score.Tally
		want    []string
		skipped bool
	}{
		{"all pass", tallyOf(18, 20, 0, 20), tallyOf(2, 20, 0, 0),
			[]string{"PASS coverage >= 3× truncation", "PASS coverage > 70%", "PASS stale-fact rate < 5%"}, false},
		{"ratio fails", tallyOf(18, 20, 0, 20), tallyOf(12, 20, 0, 20),
			[]string{"FAIL coverage >= 3× truncation", "PASS coverage > 70%"}, false},
		{"coverage and stale fail", tallyOf(2, 20, 5, 20), tallyOf(0, 20, 0, 20),
			[]string{"FAIL coverage > 70%", "FAIL stale-fact rate < 5%"}, false},
		{"nothing covered anywhere is no pass", tallyOf(0, 20, 0, 0), tallyOf(0, 20, 0, 0),
			[]string{"FAIL coverage >= 3× truncation"}, false},
		{"budget not measured", nil, nil, []string{"skipped"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &results{tallies: map[cell]*score.Tally{}}
			if !tt.skipped {
				r.tallies[cell{targetBudget, methodMemgate, ""}] = tt.mem
				r.tallies[cell{targetBudget, methodTruncate, ""}] = tt.tr
			}
			got := r.targetCheck()
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("target check lacks %q:\n%s", w, got)
				}
			}
		})
	}
}

func TestMarkdownTable(t *testing.T) {
	o, err := parseFlags([]string{"eval", "-budgets", "1000,4000"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &results{o: o, tallies: map[cell]*score.Tally{
		{1000, methodMemgate, ""}:  tallyOf(5, 10, 0, 2),
		{1000, methodTruncate, ""}: tallyOf(1, 10, 1, 2),
		{4000, methodMemgate, ""}:  tallyOf(9, 10, 0, 2),
		{4000, methodTruncate, ""}: tallyOf(2, 10, 0, 2),
		{0, methodFull, ""}:        tallyOf(10, 10, 0, 2),
	}}
	md := r.markdown()
	for _, w := range []string{
		"| budget | method | numbers | dates | names | preferences | goals | changed | overall | stale | mean prompt tokens |",
		"| 1000 | memgate | 50% | – | – | – | – | 100% | **58%** | 0% | 100 |",
		"| 1000 | last-N truncation | 10% | – | – | – | – | 100% | **25%** | 50% | 100 |",
		"| none | full history | 100% |",
		"stand-in",
		"Target at 4000 tokens",
	} {
		if !strings.Contains(md, w) {
			t.Errorf("report lacks %q:\n%s", w, md)
		}
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr bool
	}{
		{[]string{"eval"}, false},
		{[]string{"eval", "-budgets", "1000, 2000"}, false},
		{[]string{"eval", "-budgets", "1k"}, true},
		{[]string{"eval", "-budgets", "0"}, true},
		{[]string{"eval", "-probe-in", "middle"}, true},
		{[]string{"eval", "-probe-in", "last"}, false},
		{[]string{"eval", "-probe-in", "new,last"}, false},
		{[]string{"eval", "-users", "0"}, true},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := parseFlags(tt.args, &strings.Builder{})
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func TestDisplayCommand(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"eval"}, "go run ./eval/cmd/eval"},
		{[]string{"eval", "-out", "/tmp/x/eval.md", "-seed", "2"}, "go run ./eval/cmd/eval -seed 2"},
		{[]string{"eval", "-out=/tmp/x.md", "--details", "d.jsonl", "-users", "8"}, "go run ./eval/cmd/eval -users 8"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := displayCommand(tt.args); got != tt.want {
				t.Fatalf("displayCommand(%q) = %q, want %q", tt.args, got, tt.want)
			}
		})
	}
}
