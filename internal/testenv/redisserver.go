package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// PrivateRedis starts a redis-server of the test's own, on a free loopback
// port, with a fresh temporary directory as its --dir, no RDB snapshots
// and args added (such as "--appendonly", "yes"), and returns its URL and
// directory once it answers PING. The server is stopped when the test
// ends. It skips under -short and fails the test when redis-server is not
// installed (`make test` installs it) or does not start.
func PrivateRedis(tb testing.TB, args ...string) (url, dir string) {
	tb.Helper()
	skipShort(tb, "Redis")
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Fatalf("testenv: redis-server not found (%v); "+hint, err, RedisEnv)
	}
	dir = tb.TempDir()
	var lastErr error
	for range 3 { // the free port may be taken before the server binds it
		port, err := freePort()
		if err != nil {
			tb.Fatalf("testenv: free port: %v", err)
		}
		url, lastErr = startRedis(tb, bin, dir, port, args)
		if lastErr == nil {
			return url, dir
		}
	}
	tb.Fatalf("testenv: start redis-server: %v", lastErr)
	return "", ""
}

// freePort returns a loopback TCP port nothing listened on a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// lockedBuffer is a bytes.Buffer safe for the process's writes and the
// test's reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startRedis runs bin on port in dir and waits, up to a minute, for it to
// answer; a server that exits or does not answer is an error (and is
// stopped).
func startRedis(tb testing.TB, bin, dir string, port int, args []string) (string, error) {
	tb.Helper()
	cmd := exec.Command(bin, append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--dir", dir, "--save", "", "--daemonize", "no", "--protected-mode", "yes"}, args...)...)
	cmd.Dir = dir
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	url := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	opts, err := redis.ParseURL(url)
	if err != nil {
		stop()
		return "", err
	}
	c := redis.NewClient(opts)
	defer c.Close()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-exited:
			exited <- err
			stop()
			return "", fmt.Errorf("redis-server exited (%v): %s", err, out)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			stop()
			return "", fmt.Errorf("redis-server on port %d did not answer: %v: %s", port, err, out)
		}
	}
	tb.Cleanup(stop)
	return url, nil
}
