package dialecttest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// sdkDir returns the absolute path of testdata/sdk beside this file.
func sdkDir(tb testing.TB) string {
	tb.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("dialecttest: cannot locate the SDK scripts")
	}
	return filepath.Join(filepath.Dir(file), "testdata", "sdk")
}

var installMu sync.Mutex

// SDKDir returns the directory of the SDK scripts with their dependencies
// installed. It skips the test under -short when node or npm is missing and
// fails it otherwise. When node_modules is absent it runs npm ci (network
// needed once; afterwards nothing is fetched), holding a file lock so that
// test binaries running at once install only once.
func SDKDir(tb testing.TB) string {
	tb.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if testing.Short() {
				tb.Skipf("%s is not installed (-short)", tool)
			}
			tb.Fatalf("%s is required for the SDK tests: %v", tool, err)
		}
	}
	dir := sdkDir(tb)
	installMu.Lock()
	defer installMu.Unlock()
	lock, err := os.OpenFile(filepath.Join(dir, ".install.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		tb.Fatal(err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err == nil {
		return dir
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
	return dir
}

// RunScript runs node on one of the SDK scripts ("anthropic.mjs",
// "responses.mjs") with env added to the environment, and returns what it
// printed. It fails the test when the script fails or runs over two minutes.
func RunScript(tb testing.TB, script string, env ...string) []byte {
	tb.Helper()
	dir := SDKDir(tb)
	cmd := exec.Command("node", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			tb.Fatalf("node %s: %v\nstderr:\n%s\nstdout:\n%s", script, err, stderr.Bytes(), stdout.Bytes())
		}
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-done
		tb.Fatalf("node %s did not finish in two minutes\nstderr:\n%s", script, stderr.Bytes())
	}
	return stdout.Bytes()
}
