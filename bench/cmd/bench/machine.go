package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// machine describes where the benchmark ran.
type machine struct {
	date      string
	cpu       string
	nproc     int
	kernel    string
	goVersion string
	loadavg   string // 1, 5 and 15 minute load averages when the run began
	commit    string // of the code measured, "+ changes" when the tree is dirty
}

func describeMachine(ctx context.Context) machine {
	m := machine{
		date:      time.Now().UTC().Format("2006-01-02 15:04 MST"),
		cpu:       "unknown CPU",
		nproc:     runtime.NumCPU(),
		goVersion: runtime.Version(),
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpu = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.loadavg = strings.Join(f[:3], " ")
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.commit = strings.TrimSpace(string(out))
		if st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			m.commit += " + uncommitted changes"
		}
	}
	if out, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output(); err == nil {
		m.goVersion = strings.TrimSpace(string(out))
	}
	return m
}

// coresNote explains how the core count shapes the numbers.
func (m machine) coresNote() string {
	if m.nproc > 4 {
		return fmt.Sprintf("The load generator, the fake upstream and the proxy under test share %d CPUs; each runs in its own process.\n", m.nproc)
	}
	return fmt.Sprintf("**Only %d CPUs**: the load generator, the fake upstream and the proxy under test run as separate processes "+
		"but compete for the same cores, so throughput is bounded by total CPU per request across all three, "+
		"and at high concurrency latency is mostly queueing for a core. "+
		"The ratios between targets measured in the same run are more meaningful than the absolute numbers; "+
		"*CPU/req* shows each proxy's own cost independent of that contention.\n", m.nproc)
}
