//go:build race

package main

// raceAllocFactor scales allocation bounds under the race detector, which
// instruments allocations and empties sync.Pools at random: the hostile
// punctuation input allocated 343× its size without it and 6,767× with it,
// the tiny messages 553× and 2,135× (TestHostileInputsCostLinearWork, this
// machine, 2026-11-30).
const raceAllocFactor = 25
