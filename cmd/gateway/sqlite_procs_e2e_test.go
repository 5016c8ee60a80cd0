package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestSQLiteProcessesDrainInOrder: `gateway serve` (with its in-process
// worker) and `gateway worker`, two real processes on one SQLite file,
// both running when a backlog lands in its capture outbox (as a process
// whose store failed leaves one). Every queued turn is stored once, each
// conversation's in the order queued: one of the processes drains at a
// time. The backlog is queued only once both are up: queued before, it was
// drained whole by the worker while `serve` was still starting, and the
// test saw one process at work, not two.
func TestSQLiteProcessesDrainInOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway binary")
	}
	bin := filepath.Join(t.TempDir(), "gateway")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	path := filepath.Join(t.TempDir(), "memgate.db")
	st, err := sqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	const convs, turns = 4, 60
	msg := func(role, text string) memory.Message {
		m, err := memory.ParseMessage(fmt.Appendf(nil, `{"role":%q,"content":%q}`, role, text))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	var backlog [][]byte
	for i := range turns {
		for c := range convs {
			text := fmt.Sprintf("c%d turn %02d", c, i)
			ex := memory.Exchange{ID: record.NewExchangeID(), At: time.Now().UTC(), Model: "gpt-4o-mini",
				Identity: memory.Identity{Tenant: memory.DefaultTenant, User: "backlog", Conversation: fmt.Sprint("c", c)},
				Turn:     []memory.Message{msg("user", text)}, Reply: msg("assistant", "ok")}
			b, err := json.Marshal(ex)
			if err != nil {
				t.Fatal(err)
			}
			backlog = append(backlog, b)
		}
	}

	up := upstreamtest.New(t, upstreamtest.Chat(upstreamtest.Reply{Content: "ok"}))
	env := []string{"GATEWAY_SQLITE_PATH=" + path, "GATEWAY_LISTEN=127.0.0.1:0", "GATEWAY_UPSTREAM_BASE_URL=" + up.URL()}
	runBinary(t, bin, "worker", env, "capture worker running")
	_, url := startBinary(t, bin, env)
	if err := st.Outbox().EnqueueBatch(context.Background(), backlog); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(60 * time.Second)
	for {
		n, err := st.Outbox().Pending(context.Background())
		if err == nil && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backlog not drained: %d pending (%v)", n, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for c := range convs {
		var want []string
		for i := range turns {
			want = append(want, fmt.Sprintf("c%d turn %02d", c, i))
		}
		if got := storedUserTurns(t, url, "backlog", fmt.Sprint("c", c)); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("conversation c%d stored out of order or incomplete:\n%v", c, got)
		}
	}
}
