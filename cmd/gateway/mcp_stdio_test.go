package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate/internal/testenv"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// mcpCommand runs `gateway mcp args...` in-process with vars, its stdin and
// stdout piped to the SDK's client, and returns the client's session; the
// command must return nil once the session is closed.
func mcpCommand(t *testing.T, vars map[string]string, args ...string) *mcp.ClientSession {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	logs := &logSink{addr: make(chan string, 1)}
	done := make(chan error, 1)
	go func() {
		err := run(context.Background(), append([]string{"gateway", "mcp"}, args...), env(vars), inR, outW, logs)
		outW.Close()
		done <- err
	}()
	cs, err := mcpClient().Connect(context.Background(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connect to gateway mcp: %v\n%s", err, logs)
	}
	t.Cleanup(func() {
		cs.Close()
		inW.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("gateway mcp: %v\n%s", err, logs)
			}
		case <-time.After(30 * time.Second):
			t.Error("gateway mcp did not return after its client left")
		}
	})
	return cs
}

// TestMCPStdioCommand: `gateway mcp` serves the SDK's client over its
// stdin and stdout, on each store, for the tenant its -tenant flag names:
// a fact added in one session is there in the next, and not in another
// tenant.
func TestMCPStdioCommand(t *testing.T) {
	up := upstreamtest.New(t, recallUpstream())
	stores := map[string]func(t *testing.T) map[string]string{
		"sqlite": func(t *testing.T) map[string]string {
			return map[string]string{"GATEWAY_SQLITE_PATH": filepath.Join(t.TempDir(), "memgate.db")}
		},
		"postgres": func(t *testing.T) map[string]string {
			return map[string]string{"GATEWAY_STORE": "postgres", "GATEWAY_POSTGRES_URL": testenv.PostgresURL(t)}
		},
	}
	for name, mk := range stores {
		t.Run(name, func(t *testing.T) {
			vars := mk(t)
			vars["GATEWAY_UPSTREAM_BASE_URL"] = up.URL()
			func() {
				cs := mcpCommand(t, vars, "-tenant", "team-1")
				mustTool(t, cs, "add_fact", map[string]any{"user": "ana", "type": "profile", "key": "city", "value": "lives in Porto"}, nil)
				cs.Close()
			}()
			var facts factsAnswer
			mustTool(t, mcpCommand(t, vars, "-tenant", "team-1"), "list_facts", map[string]any{"user": "ana"}, &facts)
			if len(facts.Facts) != 1 || facts.Facts[0].Value != "lives in Porto" {
				t.Fatalf("next session on team-1 lists %+v", facts.Facts)
			}
			mustTool(t, mcpCommand(t, vars), "list_facts", map[string]any{"user": "ana"}, &facts)
			if len(facts.Facts) != 0 {
				t.Fatalf("the default tenant lists team-1's facts: %+v", facts.Facts)
			}
		})
	}
}

func TestMCPCommandRejectsABadTenant(t *testing.T) {
	err := run(context.Background(), []string{"gateway", "mcp", "-tenant", "no spaces"}, env(map[string]string{}), strings.NewReader(""), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "tenant") {
		t.Fatalf("err = %v", err)
	}
}

// TestMCPStdioBesideServe: a fact added through `gateway mcp` on the
// SQLite file a running `gateway serve` uses reaches that gateway's next
// prompt for the user (the store's caches follow writes of any process).
func TestMCPStdioBesideServe(t *testing.T) {
	up := upstreamtest.New(t, recallUpstream())
	vars := map[string]string{"GATEWAY_UPSTREAM_BASE_URL": up.URL(), "GATEWAY_SQLITE_PATH": filepath.Join(t.TempDir(), "memgate.db")}
	// A generous load timeout: on a busy machine under -race the default can
	// leave memory out of the prompt, and the fact with it.
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfgPath, []byte("memory:\n  load_timeout: 10s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	serveVars := map[string]string{"GATEWAY_CONFIG": cfgPath}
	for k, v := range vars {
		serveVars[k] = v
	}
	url, _ := mustServeEnv(t, serveVars)
	if r := chat(t, url, headers("", "ana", "c1"), false, user("Hello there.")); r.Status != http.StatusOK {
		t.Fatalf("chat: %d", r.Status)
	}
	mustTool(t, mcpCommand(t, vars), "add_fact", map[string]any{"user": "ana", "type": "limit", "key": "diet", "value": "eats no gluten"}, nil)
	if r := chat(t, url, headers("", "ana", "c1"), false, user("Suggest a lunch for today.")); r.Status != http.StatusOK {
		t.Fatalf("chat: %d", r.Status)
	}
	if prompt := lastChatPrompt(t, up); !strings.Contains(prompt, "eats no gluten") {
		t.Fatalf("the fact added by gateway mcp is not in serve's next prompt:\n%s", prompt)
	}
}
