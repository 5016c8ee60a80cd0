package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// runGoBench runs the Go micro-benchmarks of the packages that exist under
// root and returns their output (or the failure, so the report shows it).
func runGoBench(ctx context.Context, root string, pkgs []string) string {
	var have []string
	for _, p := range pkgs {
		if fi, err := os.Stat(filepath.Join(root, p)); err == nil && fi.IsDir() {
			have = append(have, p)
		}
	}
	if len(have) == 0 {
		return ""
	}
	args := append([]string{"test", "-run", "^$", "-bench", ".", "-benchmem"}, have...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	var keep []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "Benchmark") || strings.HasPrefix(line, "pkg:") ||
			strings.HasPrefix(line, "cpu:") || strings.HasPrefix(line, "FAIL") || strings.HasPrefix(line, "---") {
			keep = append(keep, line)
		}
	}
	if err != nil {
		keep = append(keep, fmt.Sprintf("go %s: %v", strings.Join(args, " "), err))
	}
	return strings.Join(keep, "\n")
}
