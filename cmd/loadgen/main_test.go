package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/memgate/memgate/bench/fakeupstream"
)

func TestRun(t *testing.T) {
	srv := httptest.NewServer(fakeupstream.Handler(fakeupstream.Options{}))
	t.Cleanup(srv.Close)
	var gotHeader string
	probe := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHeader = r.Header.Get("X-Memory-Mode")
	}))
	t.Cleanup(probe.Close)
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"closed loop", []string{"-url", srv.URL + "/v1/chat/completions", "-c", "2", "-d", "0", "-n", "20", "-warmup", "0", "-body", `{}`},
			[]string{"20 ok, 0 errors", "p99.9"}},
		{"stream", []string{"-url", srv.URL + "/v1/chat/completions", "-c", "2", "-d", "0", "-n", "10", "-warmup", "0", "-stream", "-body", `{"stream":true}`},
			[]string{"10 ok, 0 errors", "ttfb"}},
		{"headers", []string{"-url", probe.URL, "-H", "X-Memory-Mode: off", "-d", "0", "-n", "1", "-warmup", "0"},
			[]string{"1 ok"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			if err := run(context.Background(), append([]string{"loadgen"}, tt.args...), &out, &out); err != nil {
				t.Fatalf("run: %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
	if gotHeader != "off" {
		t.Errorf("X-Memory-Mode reached the server as %q", gotHeader)
	}
	if err := run(context.Background(), []string{"loadgen", "-H", "bad"}, &strings.Builder{}, &strings.Builder{}); err == nil {
		t.Error("malformed -H accepted")
	}
}
