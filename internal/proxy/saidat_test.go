package proxy

import (
	"net/http"
	"testing"
	"time"
)

func TestSaidAt(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		header string
		want   time.Time
		bad    bool
	}{
		{"", now, false},
		{"2024-05-07T18:30:00Z", time.Date(2024, 5, 7, 18, 30, 0, 0, time.UTC), false},
		{"2024-05-07T20:30:00.5+02:00", time.Date(2024, 5, 7, 18, 30, 0, 5e8, time.UTC), false},
		{now.Add(2 * time.Minute).Format(time.RFC3339), now, false}, // clock skew: never dated after arrival
		{now.Add(time.Hour).Format(time.RFC3339), time.Time{}, true},
		{"2024-05-07", time.Time{}, true},
		{"yesterday", time.Time{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			h := http.Header{}
			if tt.header != "" {
				h.Set(TimestampHeader, tt.header)
			}
			got, aerr := saidAt(h, now)
			if tt.bad {
				if aerr == nil || aerr.Status != http.StatusBadRequest || aerr.Param != TimestampHeader {
					t.Fatalf("saidAt(%q) = %v, %v; want a 400 naming %s", tt.header, got, aerr, TimestampHeader)
				}
				return
			}
			if aerr != nil || !got.Equal(tt.want) {
				t.Fatalf("saidAt(%q) = %v, %v; want %v", tt.header, got, aerr, tt.want)
			}
		})
	}
}
