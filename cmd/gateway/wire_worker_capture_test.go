package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/testenv"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// rywUpstream answers every chat and checks, for a turn "<conv> turn <n>"
// with n > 0, that the prompt memgate sent holds turn n-1 of the same
// conversation (the client sends only its newest message).
type rywUpstream struct {
	hits, misses atomic.Int64
}

func (u *rywUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Messages []json.RawMessage `json:"messages"`
	}
	_ = json.Unmarshal(body, &req)
	var all []string
	last := ""
	for _, raw := range req.Messages {
		if m, err := memory.ParseMessage(raw); err == nil {
			all = append(all, m.Content)
			if m.Role == "user" {
				last = m.Content
			}
		}
	}
	var conv string
	var n int
	if _, err := fmt.Sscanf(last, "%s turn %d", &conv, &n); err == nil && n > 0 {
		prev := fmt.Sprintf("%s turn %d", conv, n-1)
		if strings.Contains(strings.Join(all[:len(all)-1], "\n"), prev) {
			u.hits.Add(1)
		} else {
			u.misses.Add(1)
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	upstreamtest.Chat(upstreamtest.Reply{Content: "ok"}).ServeHTTP(w, r)
}

// captureConfigs are the two store setups, against upstream url.
func captureConfigs(url string) map[string]func(t *testing.T) config.Config {
	base := func() config.Config {
		c := config.Default()
		c.Upstream.BaseURL = url
		c.Upstream.Retries = 0
		c.Memory.LoadTimeout = config.Duration(10 * time.Second)
		return c
	}
	return map[string]func(t *testing.T) config.Config{
		"sqlite": func(t *testing.T) config.Config {
			c := base()
			c.Store.SQLitePath = filepath.Join(t.TempDir(), "memgate.db")
			return c
		},
		"postgres+redis": func(t *testing.T) config.Config {
			c := base()
			c.Store.Driver = "postgres"
			c.Store.PostgresURL = testenv.PostgresURL(t)
			c.Store.RedisURL = testenv.RedisURL(t)
			c.Store.RedisPrefix = testenv.RedisPrefix(t)
			return c
		},
	}
}

// postChat sends one memory-on chat with only the newest message and
// reports whether it was answered 200 in full.
func postChat(ctx context.Context, client *http.Client, url, user, conv, text string) bool {
	return postChatAs(ctx, client, url, user, conv, text, false)
}

// postChatAs is postChat, streamed when stream is set: a stream counts as
// answered only when the client read its [DONE] event to its end.
func postChatAs(ctx context.Context, client *http.Client, url, user, conv, text string, stream bool) bool {
	body, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "stream": stream, "messages": []any{map[string]string{"role": "user", "content": text}}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Memory-User", user)
	req.Header.Set("X-Memory-Conversation", conv)
	req.Header.Set("X-Request-Id", "same-id-every-time")
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return false
	}
	return !stream || bytes.HasSuffix(got, []byte("data: [DONE]\n\n"))
}

// TestReadYourWritesUnderLoad: with 32 other connections busy, a turn sent
// 50ms after the previous turn's answer, carrying only the newest message,
// finds the previous turn in its prompt — every time, on both stores.
func TestReadYourWritesUnderLoad(t *testing.T) {
	up := &rywUpstream{}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	for name, cfgFor := range captureConfigs(srv.URL + "/v1") {
		t.Run(name, func(t *testing.T) {
			up.hits.Store(0)
			up.misses.Store(0)
			g := startGateway(t, cfgFor(t))
			ctx, cancel := context.WithCancel(context.Background())
			var busy sync.WaitGroup
			for b := range 32 {
				busy.Go(func() {
					for i := 0; ctx.Err() == nil; i++ {
						postChat(ctx, http.DefaultClient, g.URL, "busy", fmt.Sprint("b", b), fmt.Sprintf("b%d-noise %d", b, i))
					}
				})
			}
			var probes sync.WaitGroup
			var unanswered atomic.Int64
			for p := range 8 {
				probes.Go(func() {
					conv := fmt.Sprint("p", p)
					for i := range 8 {
						if !postChat(context.Background(), http.DefaultClient, g.URL, "prober", conv, fmt.Sprintf("%s turn %d", conv, i)) {
							unanswered.Add(1)
						}
						time.Sleep(50 * time.Millisecond)
					}
				})
			}
			probes.Wait()
			cancel()
			busy.Wait()
			if n := unanswered.Load(); n != 0 {
				t.Fatalf("%d probe turns not answered", n)
			}
			hits, misses := up.hits.Load(), up.misses.Load()
			if hits != 8*7 || misses != 0 {
				t.Fatalf("previous turn in the prompt %d times, missing %d times; want %d and 0", hits, misses, 8*7)
			}
		})
	}
}

// TestCrashWindowKill9 builds the gateway, sends chats from several
// clients (half of them streaming), kills the process with SIGKILL
// mid-load, restarts it, and checks that every turn answered — a 200, or a
// stream read to its [DONE] — is stored exactly once, in the order sent (a
// turn in flight at the kill may be stored too, after them).
func TestCrashWindowKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the gateway binary")
	}
	bin := filepath.Join(t.TempDir(), "gateway")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	up := upstreamtest.New(t, upstreamtest.Chat(upstreamtest.Reply{Content: "ok"}))
	stores := map[string]func(t *testing.T) []string{
		"sqlite": func(t *testing.T) []string {
			return []string{"GATEWAY_SQLITE_PATH=" + filepath.Join(t.TempDir(), "memgate.db")}
		},
		"postgres+redis": func(t *testing.T) []string {
			cfg := filepath.Join(t.TempDir(), "config.yaml")
			yaml := fmt.Sprintf("store:\n  driver: postgres\n  postgres_url: %q\n  redis_url: %q\n  redis_prefix: %q\n",
				testenv.PostgresURL(t), testenv.RedisURL(t), testenv.RedisPrefix(t))
			if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			return []string{"GATEWAY_CONFIG=" + cfg}
		},
	}
	for name, envFor := range stores {
		t.Run(name, func(t *testing.T) {
			env := append(envFor(t), "GATEWAY_LISTEN=127.0.0.1:0", "GATEWAY_UPSTREAM_BASE_URL="+up.URL())
			cmd, url := startBinary(t, bin, env)
			const clients = 8
			answered := make([][]string, clients)
			var sent atomic.Int64
			var wg sync.WaitGroup
			client := &http.Client{Timeout: 10 * time.Second}
			for c := range clients {
				wg.Go(func() {
					for i := 0; ; i++ {
						text := fmt.Sprintf("c%d turn %d", c, i)
						if !postChatAs(context.Background(), client, url, "crash", fmt.Sprint("c", c), text, c%2 == 1) {
							return // the gateway is gone
						}
						answered[c] = append(answered[c], text)
						sent.Add(1)
					}
				})
			}
			for sent.Load() < 200 {
				time.Sleep(time.Millisecond)
			}
			if err := cmd.Process.Kill(); err != nil { // SIGKILL
				t.Fatal(err)
			}
			_ = cmd.Wait()
			wg.Wait()

			_, url = startBinary(t, bin, env)
			for c := range clients {
				stored := storedUserTurns(t, url, "crash", fmt.Sprint("c", c))
				want := answered[c]
				if len(stored) < len(want) || len(stored) > len(want)+1 ||
					strings.Join(stored[:len(want)], "|") != strings.Join(want, "|") {
					t.Fatalf("client %d: answered %d turns %v\nstored %d %v", c, len(want), want, len(stored), stored)
				}
				if len(stored) == len(want)+1 && stored[len(want)] != fmt.Sprintf("c%d turn %d", c, len(want)) {
					t.Fatalf("client %d: stored an unexpected extra turn %q", c, stored[len(want)])
				}
			}
		})
	}
}

// startBinary runs the gateway binary with env, waits for /healthz, and
// kills it when the test ends.
func startBinary(t *testing.T, bin string, env []string) (*exec.Cmd, string) {
	t.Helper()
	cmd, addr := runBinary(t, bin, "serve", env, "listening")
	url := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return cmd, url
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz never answered: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runBinary runs the gateway binary's command with env, kills it when the
// test ends, and waits (up to a minute: a loaded machine starts it
// slowly) for its log to say msg, returning that line's addr.
func runBinary(t *testing.T, bin, command string, env []string, msg string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(bin, command)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	said := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() { // to EOF, so the process never blocks on its log
			var l struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == msg {
				select {
				case said <- l.Addr:
				default:
				}
			}
		}
	}()
	select {
	case addr := <-said:
		return cmd, addr
	case <-time.After(60 * time.Second):
		t.Fatalf("gateway %s never logged %q", command, msg)
		return nil, ""
	}
}

// storedUserTurns lists the user messages stored in a conversation,
// through the management API, page by page.
func storedUserTurns(t *testing.T, url, user, conv string) []string {
	t.Helper()
	var out []string
	for after := int64(0); ; {
		resp, err := http.Get(fmt.Sprintf("%s/v1/memory/conversations/%s?user=%s&after=%d", url, conv, user, after))
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusNotFound {
			resp.Body.Close()
			return nil
		}
		var body struct {
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
			LastID  int64 `json:"last_id"`
			HasMore bool  `json:"has_more"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range body.Messages {
			if m.Role == "user" {
				out = append(out, m.Content)
			}
		}
		if !body.HasMore {
			return out
		}
		after = body.LastID
	}
}
