package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// server is a benchmark server running as a child process.
type server struct {
	name    string
	baseURL string // ends in /v1
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	// dbURL is the PostgreSQL database a memgate-pg gateway stores into
	// (empty for other servers).
	dbURL string
}

// startChild re-executes this binary in a server role (see serveRole) and
// waits for it to report its address.
func startChild(ctx context.Context, dir, role string, env ...string) (*server, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), append([]string{roleEnv + "=" + role}, env...)...)
	s := &server{name: role, logPath: filepath.Join(dir, role+".log")}
	logf, err := os.Create(s.logPath)
	if err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	defer logf.Close()
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	if err := s.start(cmd); err != nil {
		return nil, err
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), listeningPrefix); ok {
				lines <- addr
				return
			}
		}
		close(lines)
	}()
	select {
	case addr, ok := <-lines:
		if !ok {
			s.stop()
			return nil, fmt.Errorf("%s exited before listening: %s", role, s.logTail())
		}
		s.baseURL = "http://" + addr + "/v1"
		return s, nil
	case <-time.After(15 * time.Second):
		s.stop()
		return nil, fmt.Errorf("%s did not start within 15s: %s", role, s.logTail())
	}
}

// startGateway runs the memgate binary as `gateway serve` in front of
// upstream, on a free port, working in dir, with env added to its
// environment (the store's settings).
func startGateway(ctx context.Context, dir, bin, name, upstream string, env ...string) (*server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, "serve")
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(),
		"GATEWAY_UPSTREAM_BASE_URL="+upstream,
		"GATEWAY_LISTEN="+addr,
		"GATEWAY_LOG_LEVEL=warn",
		// The stand-in upstream takes any key; with one, the side models
		// (summariser, fact extraction) are called as in production.
		"GATEWAY_UPSTREAM_API_KEY=bench-stand-in-key",
	), env...)
	s := &server{name: name, baseURL: "http://" + addr + "/v1", logPath: filepath.Join(dir, name+".log")}
	logf, err := os.Create(s.logPath)
	if err != nil {
		return nil, fmt.Errorf("create log: %w", err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := s.start(cmd); err != nil {
		return nil, err
	}
	if err := s.waitHealthy(ctx, "http://"+addr+"/healthz", 30*time.Second); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// rootURL is the server's address without the /v1 API prefix.
func (s *server) rootURL() string { return strings.TrimSuffix(s.baseURL, "/v1") }

func (s *server) start(cmd *exec.Cmd) error {
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.name, err)
	}
	s.cmd = cmd
	s.exited = make(chan struct{})
	go func() {
		cmd.Wait()
		close(s.exited)
	}()
	return nil
}

// waitHealthy polls url until it answers 200, the process exits, or the
// deadline passes.
func (s *server) waitHealthy(ctx context.Context, url string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.exited:
			return fmt.Errorf("%s exited during start-up: %s", s.name, s.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not healthy within %v: %s", s.name, within, s.logTail())
}

// stop asks the process to exit and waits for it.
func (s *server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
}

// logTail returns the end of the process's log, for error messages.
func (s *server) logTail() string {
	b, _ := os.ReadFile(s.logPath)
	b = bytes.TrimSpace(b)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	if len(b) == 0 {
		return "(no output)"
	}
	return string(b)
}

// procStats is a snapshot of a process's resource use.
type procStats struct {
	cpu time.Duration // user + system
	rss int64         // resident set, bytes
}

// stats reads the process's CPU time, the sum of its threads'
// /proc/PID/task/TID/schedstat (in nanoseconds: /proc/PID/stat counts 10ms
// ticks, too coarse for a short cell's CPU per request or for telling a
// quiet process from an idle one; /proc/PID/schedstat is the main thread's
// alone), and its RSS, from /proc/PID/stat. A thread that exited is no
// longer counted; a Go process keeps its threads.
func (s *server) stats() (procStats, error) {
	pid := s.cmd.Process.Pid
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return procStats{}, fmt.Errorf("list threads: %w", err)
	}
	var cpu time.Duration
	for _, t := range tasks {
		sched, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // the thread has exited
		}
		f := strings.Fields(string(sched))
		if len(f) == 0 {
			return procStats{}, errors.New("empty /proc schedstat")
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return procStats{}, fmt.Errorf("parse schedstat: %w", err)
		}
		cpu += time.Duration(ns)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStats{}, fmt.Errorf("read stat: %w", err)
	}
	// Fields after the parenthesised command name; rss is the 24th field
	// of the whole line.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return procStats{}, errors.New("malformed /proc stat")
	}
	sf := strings.Fields(string(stat[i+1:]))
	if len(sf) < 22 {
		return procStats{}, errors.New("short /proc stat")
	}
	rssPages, _ := strconv.ParseInt(sf[21], 10, 64)
	return procStats{cpu: cpu, rss: rssPages * int64(os.Getpagesize())}, nil
}

// rssSplit reads the process's resident set split into anonymous memory
// (heap, stacks: what the process allocated) and file-backed pages (the
// binary, and database files mapped into memory, which the kernel may drop
// and re-read at will), in bytes, from /proc/PID/status.
func (s *server) rssSplit() (anon, file int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0, 0, fmt.Errorf("read status: %w", err)
	}
	return statusKB(b, "RssAnon:") << 10, statusKB(b, "RssFile:") << 10, nil
}

// statusKB returns the value in kB of a /proc/PID/status field, or 0.
func statusKB(status []byte, field string) int64 {
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// buildGateway compiles ./cmd/gateway of the module at root into dir.
func buildGateway(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "gateway")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/gateway")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build ./cmd/gateway: %w\n%s", err, out)
	}
	return bin, nil
}

// moduleRoot returns the directory of the enclosing go.mod.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside a Go module; run from the memgate repository")
	}
	return filepath.Dir(mod), nil
}
