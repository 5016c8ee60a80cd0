package main

import (
	"strings"
	"testing"

	"github.com/memgate/memgate/eval/score"
	"github.com/memgate/memgate/eval/synth"
)

// tallyOf returns a tally with covered of n evidence turns covered for
// every question type, the covered ones 400 turns back and the rest 50.
func tallyOf(covered, n int) *score.Tally {
	t := &score.Tally{}
	for _, ty := range synth.Types {
		for i := range n {
			depth := 50
			if i < covered {
				depth = 400
			}
			t.Add([]score.Outcome{{Type: ty, Depth: depth, Covered: i < covered, Dated: ty == synth.Temporal && i < covered}}, 100)
		}
	}
	return t
}

func TestGoalCheck(t *testing.T) {
	weakType := tallyOf(9, 10)
	for range 10 {
		weakType.Add([]score.Outcome{{Type: synth.MultiHop, Depth: 50}}, 100)
	}
	tests := []struct {
		name string
		mem  *score.Tally
		want []string
	}{
		{"all pass", tallyOf(9, 10), []string{"PASS coverage >= 70%: 90%", "PASS every type >= 50%", "PASS evidence 300+ turns back >= 60%: 100%"}},
		{"low overall", tallyOf(3, 10), []string{"FAIL coverage >= 70%: 30%", "FAIL every type >= 50%: lowest 30%"}},
		{"one weak type", weakType, []string{"FAIL every type >= 50%: lowest 45% (multi-hop)"}},
		{"not measured", nil, []string{"skipped"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &results{tallies: map[cell]*score.Tally{}, methods: []string{methodMemgate}}
			if tt.mem != nil {
				r.tallies[cell{targetBudget, methodMemgate}] = tt.mem
			}
			got := r.goalCheck()
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("goal check lacks %q:\n%s", w, got)
				}
			}
		})
	}
}

func TestMarkdownTables(t *testing.T) {
	o, err := parseFlags([]string{"eval", "-budgets", "4000"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &results{o: o, methods: []string{methodMemgate}, tallies: map[cell]*score.Tally{
		{4000, methodMemgate}:  tallyOf(5, 10),
		{4000, methodTruncate}: tallyOf(2, 10),
		{4000, methodBM25}:     tallyOf(6, 10),
		{0, methodFull}:        tallyOf(10, 10),
	}}
	md := r.markdown()
	for _, w := range []string{
		"| budget | method | single-hop | adjacent | multi-hop | temporal | paraphrase | **overall** | temporal with its date | mean prompt tokens |",
		"| 4000 | memgate | 50% | 50% | 50% | 50% | 50% | **50%** | 50% | 100 |",
		"| 4000 | last-N truncation | 20% |",
		"| 4000 | BM25 over turns | 60% |",
		"| none | full history | 100% |",
		"| budget | method | 0–100 | 100–300 | 300+ | overall |",
		"| 4000 | memgate | 0% | – | 100% | 50% |",
		"imported with the time it was said",
		"`POST /v1/memory/import`",
		"Goal of issue 14 at 4000 tokens",
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
		{[]string{"eval", "-said-at-header", "X-Memory-Said-At"}, false},
		{[]string{"eval", "-deliver", "chat"}, false},
		{[]string{"eval", "-deliver", "replay"}, true},
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
