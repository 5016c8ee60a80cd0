package main

import (
	"strings"
	"testing"
)

func TestParseHostile(t *testing.T) {
	out := `goos: linux
BenchmarkHostileInputs/letters-2         	       1	1113024093 ns/op	   0.22 MB/s	        80.00 cpu-ms/req
BenchmarkHostileInputs/jwt-prefix-2      	       1	157550591748 ns/op	   0.00 MB/s	     18496 cpu-ms/req
BenchmarkHostileInputs/letters-2         	       1	1113024093 ns/op	   0.22 MB/s	        120.0 cpu-ms/req
BenchmarkHostileInputs/tiny-messages     	       1	3714264050 ns/op	   0.18 MB/s	      1207 cpu-ms/req
PASS`
	got := parseHostile(out)
	want := map[string][]float64{"letters": {80, 120}, "jwt-prefix": {18496}, "tiny-messages": {1207}}
	if len(got) != len(want) {
		t.Fatalf("parsed %v, want %v", got, want)
	}
	for k, vs := range want {
		if len(got[k]) != len(vs) {
			t.Fatalf("%s: %v, want %v", k, got[k], vs)
		}
		for i := range vs {
			if got[k][i] != vs[i] {
				t.Fatalf("%s: %v, want %v", k, got[k], vs)
			}
		}
	}
}

func TestHostileTableMarksTheGoal(t *testing.T) {
	table := hostileTable(machine{nproc: 2}, 2, map[string][]float64{"letters": {120, 80}, "jwt-prefix": {18496, 150, 160}})
	for _, want := range []string{
		"| letters | ", "| 120 | 120 | ✅ |", // the upper median of two
		"| 160 | 18496 | ❌ |", "| tiny-messages | ", "| — | — | not run |",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}
