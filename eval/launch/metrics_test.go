package launch

import "testing"

func TestSumMetric(t *testing.T) {
	text := `# HELP memgate_capture_saved_total Exchanges saved.
# TYPE memgate_capture_saved_total counter
memgate_capture_saved_total 12
memgate_capture_saved_total_extra 99
memgate_capture_failures_total{stage="save"} 2
memgate_capture_failures_total{stage="ack"} 3
memgate_capture_lag_seconds_bucket{le="0.1"} 7
`
	tests := []struct {
		name string
		want float64
	}{
		{"memgate_capture_saved_total", 12},
		{"memgate_capture_failures_total", 5},
		{"memgate_capture_lag_seconds", 0},
		{"memgate_absent_total", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sumMetric(text, tt.name); got != tt.want {
				t.Fatalf("sumMetric(%s) = %v, want %v", tt.name, got, tt.want)
			}
		})
	}
}
