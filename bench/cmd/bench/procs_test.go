package main

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestStatusKB(t *testing.T) {
	status := []byte("Name:\tgateway\nVmRSS:\t  90000 kB\nRssAnon:\t   30000 kB\nRssFile:\t   59000 kB\n")
	tests := []struct {
		field string
		want  int64
	}{
		{"RssAnon:", 30000},
		{"RssFile:", 59000},
		{"RssShmem:", 0},
	}
	for _, tt := range tests {
		if got := statusKB(status, tt.field); got != tt.want {
			t.Errorf("%s = %d, want %d", tt.field, got, tt.want)
		}
	}
}

// The split of a live process (this test) adds up to about its RSS.
func TestRSSSplit(t *testing.T) {
	p, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: &exec.Cmd{Process: p}}
	anon, file, err := s.rssSplit()
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.stats()
	if err != nil {
		t.Fatal(err)
	}
	if anon <= 0 || file <= 0 || anon+file > 2*st.rss {
		t.Errorf("anon %d + file %d against RSS %d", anon, file, st.rss)
	}
}

// stats reads CPU time finely enough to see 20ms of this test's own work.
// The test spins until stats reports it (a busy machine only makes that
// take longer), failing only if it never does.
func TestStatsCPU(t *testing.T) {
	p, err := os.FindProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: &exec.Cmd{Process: p}}
	before, err := s.stats()
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for deadline := time.Now().Add(20 * time.Second); ; {
		for start := time.Now(); time.Since(start) < 5*time.Millisecond; {
			x++
		}
		after, err := s.stats()
		if err != nil {
			t.Fatal(err)
		}
		if after.cpu-before.cpu >= 20*time.Millisecond && x > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU time grew by %v over 20s of spinning", after.cpu-before.cpu)
		}
	}
}
