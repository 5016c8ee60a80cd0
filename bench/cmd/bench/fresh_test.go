package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/memgate/memgate/bench/fakeupstream"
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

// TestFreshTurnDegraded checks freshTurn returns the gateway's
// X-Memory-Degraded along with the fake upstream's answer.
func TestFreshTurnDegraded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(fakeupstream.RecallHeader, "false")
		w.Header().Set("X-Memory-Degraded", "history")
		fmt.Fprint(w, "{}")
	}))
	defer srv.Close()
	seen, degraded, err := freshTurn(context.Background(), srv.Client(), &server{baseURL: srv.URL + "/v1"}, "u", "note")
	if err != nil || seen || degraded != "history" {
		t.Fatalf("freshTurn = %v, %q, %v, want false, \"history\", nil", seen, degraded, err)
	}
}

func TestFreshSection(t *testing.T) {
	r := report{fresh: []fresh{{server: "memgate", conns: 4, turns: 5, checked: 16, hits: 12, lost: 1,
		degradedHistory: 4, degradedAny: 6,
		capture: captureStat{exchanges: 20, drained: true}}}}
	got := r.freshSection()
	for _, want := range []string{"4 connections", "5 turns", "| degraded (history / any) |",
		"| memgate | 20 | **75.0%** (12 of 16) | 25.0% / 37.5% |"} {
		if !strings.Contains(got, want) {
			t.Errorf("section lacks %q:\n%s", want, got)
		}
	}
}
