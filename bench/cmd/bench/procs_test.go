package main

import (
	"os"
	"os/exec"
	"testing"
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
