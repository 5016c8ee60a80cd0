// Package launch builds the memgate gateway binary, runs it as a subprocess
// on a throwaway SQLite database, and talks to it the way an application
// does. The evaluation and the demo measure the real program, wired exactly
// as `gateway serve` wires it.
package launch

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Build compiles ./cmd/gateway of the module at root into dir and returns
// the binary's path.
func Build(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "gateway")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/gateway")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/gateway: %w\n%s", err, out)
	}
	return bin, nil
}

// ModuleRoot returns the directory holding go.mod, searching upwards from the
// working directory.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory: run from the memgate repository")
		}
		dir = parent
	}
}

// Options configure a gateway subprocess.
type Options struct {
	// Binary is the gateway executable.
	Binary string
	// Dir holds the config file, the SQLite database and the log.
	Dir string
	// UpstreamURL is the upstream API root, including /v1.
	UpstreamURL string
	// Config is extra YAML configuration (may be empty: the defaults).
	Config string
	// Env are KEY=VALUE settings added to the gateway's environment after
	// the launcher's own, which they override (e.g. GATEWAY_STORE).
	Env []string
}

// Gateway is a running gateway subprocess.
type Gateway struct {
	// URL is the gateway's root URL (no /v1).
	URL string
	// LogPath is the file receiving the gateway's JSON log.
	LogPath string
	cmd     *exec.Cmd
	exited  chan error
	client  *http.Client
}

// Start runs the gateway with the embedded SQLite store in opts.Dir,
// listening on a free loopback port, and returns once it answers /healthz.
func Start(ctx context.Context, opts Options) (*Gateway, error) {
	cfgPath := filepath.Join(opts.Dir, "gateway.yaml")
	if err := os.WriteFile(cfgPath, []byte(opts.Config), 0o600); err != nil {
		return nil, fmt.Errorf("write gateway config: %w", err)
	}
	logPath := filepath.Join(opts.Dir, "gateway.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create gateway log: %w", err)
	}
	cmd := exec.Command(opts.Binary, "serve")
	cmd.Env = append(cleanEnv(),
		"GATEWAY_CONFIG="+cfgPath,
		"GATEWAY_LISTEN=127.0.0.1:0",
		"GATEWAY_STORE=sqlite",
		"GATEWAY_SQLITE_PATH="+filepath.Join(opts.Dir, "memgate.db"),
		"GATEWAY_UPSTREAM_BASE_URL="+opts.UpstreamURL,
		"GATEWAY_LOG_LEVEL=info",
		// The stand-in upstream takes any key; with one, the side models
		// (summariser, fact extraction) are called as in production.
		"GATEWAY_UPSTREAM_API_KEY=eval-stand-in-key",
	)
	cmd.Env = append(cmd.Env, opts.Env...)
	bindToParent(cmd)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("gateway stderr: %w", err)
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start gateway: %w", err)
	}
	g := &Gateway{LogPath: logPath, cmd: cmd, exited: make(chan error, 1), client: &http.Client{Timeout: 2 * time.Minute}}
	addr := make(chan string, 1)
	go func() {
		defer logf.Close()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			logf.Write(append(line, '\n'))
			var l struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(line, &l) == nil && l.Msg == "listening" && l.Addr != "" {
				select {
				case addr <- l.Addr:
				default:
				}
			}
		}
	}()
	go func() { g.exited <- cmd.Wait() }()

	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	select {
	case a := <-addr:
		g.URL = "http://" + a
	case err := <-g.exited:
		return nil, fmt.Errorf("gateway exited at start-up: %v (log: %s)\n%s", err, logPath, tail(logPath))
	case <-ctx.Done():
		g.kill()
		return nil, fmt.Errorf("gateway did not report its address: %w (log: %s)", ctx.Err(), logPath)
	}
	if err := g.waitHealthy(ctx); err != nil {
		g.kill()
		return nil, err
	}
	return g, nil
}

// cleanEnv is the environment without GATEWAY_* variables, so the caller's
// shell cannot change what is measured.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GATEWAY_") {
			out = append(out, kv)
		}
	}
	return out
}

func (g *Gateway) waitHealthy(ctx context.Context) error {
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, g.URL+"/healthz", nil)
		resp, err := g.client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gateway not healthy: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop asks the gateway to shut down (SIGTERM) and waits for it, killing it
// when ctx ends first.
func (g *Gateway) Stop(ctx context.Context) error {
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("signal gateway: %w", err)
	}
	select {
	case err := <-g.exited:
		if err != nil {
			return fmt.Errorf("gateway exit: %w (log: %s)", err, g.LogPath)
		}
		return nil
	case <-ctx.Done():
		g.kill()
		return fmt.Errorf("gateway did not stop: %w", ctx.Err())
	}
}

func (g *Gateway) kill() {
	_ = g.cmd.Process.Kill() // already gone is fine
	<-g.exited
}

// tail returns the last lines of a file, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-15):], "\n")
}

// drain reads and closes a response body so the connection is reused.
func drain(r io.ReadCloser) {
	_, _ = io.Copy(io.Discard, r)
	r.Close()
}
