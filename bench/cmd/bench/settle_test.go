package main

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSettle(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name    string
		samples []time.Duration // successive cumulative CPU readings
		settled bool
		reads   int // readings taken
	}{
		{"idle at once", []time.Duration{100 * ms, 101 * ms}, true, 2},
		{"busy, then idle", []time.Duration{0, 50 * ms, 100 * ms, 105 * ms}, true, 4},
		{"never idle", []time.Duration{0, 50 * ms, 100 * ms, 150 * ms, 200 * ms, 250 * ms, 300 * ms, 350 * ms}, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i := 0
			cpu := func() (time.Duration, error) {
				v := tt.samples[min(i, len(tt.samples)-1)] + time.Duration(max(0, i-len(tt.samples)+1))*50*ms
				i++
				return v, nil
			}
			// Cases that settle get all the time they need: a loaded
			// machine may not take two readings within a few ms.
			within := time.Minute
			if !tt.settled {
				within = 5 * ms
			}
			_, ok, err := settle(context.Background(), cpu, ms, 10*ms, within)
			if err != nil || ok != tt.settled {
				t.Fatalf("settled %v (%v), want %v", ok, err, tt.settled)
			}
			if tt.reads > 0 && i != tt.reads {
				t.Errorf("%d readings, want %d", i, tt.reads)
			}
		})
	}
	t.Run("read error", func(t *testing.T) {
		boom := errors.New("boom")
		if _, _, err := settle(context.Background(), func() (time.Duration, error) { return 0, boom }, ms, ms, ms); !errors.Is(err, boom) {
			t.Fatalf("err %v, want boom", err)
		}
	})
}
