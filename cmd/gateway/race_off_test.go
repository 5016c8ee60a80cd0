//go:build !race

package main

// raceAllocFactor scales allocation bounds under the race detector (see
// race_on_test.go); 1 without it.
const raceAllocFactor = 1
