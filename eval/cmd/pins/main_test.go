package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunPrintsOneRowPerLanguage(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "set.tsv")
	data := "standing\ten\tI live in Lisbon\nnot\ten\tI love it lol\nstanding\tpt\tsou vegetariana\nnot\tpt\tadorei isso\n"
	if err := os.WriteFile(f, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := run([]string{f}, &b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| all | 4 | 1.000 | 1.000 |", "| en | 2 |", "| pt | 2 |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
	if err := run([]string{filepath.Join(dir, "missing.tsv")}, &b); err == nil {
		t.Error("a missing file: want an error")
	}
}
