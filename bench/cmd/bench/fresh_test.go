package main

import (
	"strings"
	"testing"
)

func TestTally(t *testing.T) {
	tests := []struct {
		name  string
		ks    []int
		turns int
		want  turnTally
	}{
		{"all in order", []int{0, 1, 2, 3}, 4, turnTally{stored: 4}},
		{"one lost", []int{0, 1, 3}, 4, turnTally{stored: 3, lost: 1}},
		{"one twice", []int{0, 1, 1, 2}, 3, turnTally{stored: 3, duplicated: 1}},
		{"one late", []int{0, 2, 1, 3}, 4, turnTally{stored: 4, outOfOrder: 1}},
		{"nothing", nil, 2, turnTally{lost: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tally(tt.ks, tt.turns); got != tt.want {
				t.Fatalf("tally(%v, %d) = %+v, want %+v", tt.ks, tt.turns, got, tt.want)
			}
		})
	}
}

func TestFreshSection(t *testing.T) {
	r := report{fresh: []fresh{{server: "memgate", conns: 4, turns: 5, checked: 16, hits: 15, lost: 1,
		capture: captureStat{exchanges: 20, drained: true}}}}
	got := r.freshSection()
	for _, want := range []string{"4 connections", "5 turns", "**93.8%** (15 of 16)", "| memgate | 20 |"} {
		if !strings.Contains(got, want) {
			t.Errorf("section lacks %q:\n%s", want, got)
		}
	}
}
