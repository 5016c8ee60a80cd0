package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// embedCell is the remote-embedding cell (`bench embed-cell`): memgate with
// recall.embeddings.provider openai in front of an OpenAI-compatible
// /v1/embeddings endpoint that answers after a fixed latency (200 ms by
// default), with default settings otherwise (memory.load_timeout 150ms,
// memory.embedding_timeout 300ms). Conversations send only their newest
// message, turn after turn; each turn is sent twice, memory on and memory
// off (X-Memory-Mode: off, same conversation marker), and the cell reports
// the share of memory-on requests marked X-Memory-Degraded (and by which
// part), the share whose upstream request included the conversation's
// previous turn, and the added latency: p50 and p90 of memory-on minus the
// memory-off ones.
//
//	go run ./bench/cmd/bench embed-cell -embed-latency 200ms
func embedCell(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("embed-cell", flag.ContinueOnError)
	fs.SetOutput(stderr)
	latency := fs.Duration("embed-latency", 200*time.Millisecond, "latency of the embeddings endpoint")
	convs := fs.Int("convs", 8, "concurrent conversations")
	turns := fs.Int("turns", 12, "turns per conversation")
	think := fs.Duration("think", 300*time.Millisecond, "pause between a reply and the next turn (a user reading and typing)")
	bin := fs.String("gateway", "", "prebuilt gateway binary (default: go build ./cmd/gateway)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "memgate-embed-cell-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	if *bin == "" {
		root, err := moduleRoot(ctx)
		if err != nil {
			return err
		}
		if *bin, err = buildGateway(ctx, root, dir); err != nil {
			return err
		}
	}
	up := newCellUpstream(*latency)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: up, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()
	base := "http://" + ln.Addr().String() + "/v1"
	cfgPath := filepath.Join(dir, "gateway.yaml")
	yaml := fmt.Sprintf("recall:\n  embeddings:\n    provider: openai\n    base_url: %s\n    dimensions: 64\n", base)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		return err
	}
	gw, err := startGateway(ctx, dir, *bin, "memgate-embed", base, "GATEWAY_CONFIG="+cfgPath,
		"GATEWAY_STORE=sqlite", "GATEWAY_SQLITE_PATH="+filepath.Join(dir, "memgate.db"))
	if err != nil {
		return err
	}
	defer gw.stop()

	var (
		mu       sync.Mutex
		on, off  []time.Duration
		degraded = map[string]int{}
		failed   error
	)
	var wg sync.WaitGroup
	for c := range *convs {
		wg.Go(func() {
			for t := range *turns {
				marker := fmt.Sprintf("[c%d t%d]", c, t)
				text := fmt.Sprintf("%s I am planning trip number %d and wonder about detail %d of it, what do you think?", marker, c, t)
				dOn, hdr, err := cellChat(ctx, gw.baseURL, c, text, "on")
				if err == nil {
					var dOff time.Duration
					dOff, _, err = cellChat(ctx, gw.baseURL, c, marker+" off", "off")
					mu.Lock()
					on, off = append(on, dOn), append(off, dOff)
					if hdr != "" {
						degraded[hdr]++
					}
					mu.Unlock()
				}
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(*think):
				}
			}
		})
	}
	wg.Wait()
	if failed != nil {
		return failed
	}
	total := len(on)
	nDegraded := 0
	for _, n := range degraded {
		nDegraded += n
	}
	withPrev, later := up.recentTurns(*convs, *turns)
	p := func(ds []time.Duration, q float64) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[min(len(s)-1, int(q*float64(len(s))))]
	}
	fmt.Fprintf(stdout, "## Remote embeddings (%s per call), default settings\n\n", *latency)
	fmt.Fprintf(stdout, "| memory-on requests | degraded | include the previous turn | added p50 | added p90 | embedding calls |\n|---|---|---|---|---|---|\n")
	fmt.Fprintf(stdout, "| %d | %.1f %% %s | %.1f %% (%d of %d later turns) | %s | %s | %d |\n",
		total, 100*float64(nDegraded)/float64(total), fmtParts(degraded), 100*float64(withPrev)/float64(max(later, 1)), withPrev, later,
		round(p(on, 0.5)-p(off, 0.5)), round(p(on, 0.9)-p(off, 0.9)), up.embedCalls())
	return nil
}

// fmtParts lists the degraded parts and their counts.
func fmtParts(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	var parts []string
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%s: %d", k, n))
	}
	slices.Sort(parts)
	return "(" + strings.Join(parts, ", ") + ")"
}

// cellChat sends one newest-only turn of conversation c and returns its
// duration and X-Memory-Degraded.
func cellChat(ctx context.Context, base string, c int, text, mode string) (time.Duration, string, error) {
	body, _ := json.Marshal(map[string]any{
		"model":    "gpt-4o-mini",
		"messages": []map[string]string{{"role": "user", "content": text}},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/chat/completions", strings.NewReader(string(body)))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Memory-User", fmt.Sprintf("bench-user-%d", c))
	req.Header.Set("X-Memory-Conversation", fmt.Sprintf("bench-conv-%d", c))
	req.Header.Set("X-Memory-Mode", mode)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	d := time.Since(start)
	if resp.StatusCode != http.StatusOK {
		return 0, "", fmt.Errorf("chat: status %d", resp.StatusCode)
	}
	return d, resp.Header.Get("X-Memory-Degraded"), nil
}

// cellUpstream is the cell's stand-in API: chat completions answered at
// once (recording, per turn, whether the previous turn's marker was in the
// request), and embeddings answered after latency.
type cellUpstream struct {
	latency time.Duration
	mu      sync.Mutex
	prev    map[string]bool // marker of a memory-on turn → previous turn present
	calls   int
}

func newCellUpstream(latency time.Duration) *cellUpstream {
	return &cellUpstream{latency: latency, prev: map[string]bool{}}
}

func (u *cellUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case strings.HasSuffix(r.URL.Path, "/embeddings"):
		u.embeddings(w, r)
	case strings.HasSuffix(r.URL.Path, "/chat/completions"):
		u.chat(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (u *cellUpstream) embeddings(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Input      []string `json:"input"`
		Dimensions int      `json:"dimensions"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	u.mu.Lock()
	u.calls++
	u.mu.Unlock()
	select {
	case <-time.After(u.latency):
	case <-r.Context().Done():
		return
	}
	type datum struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []datum `json:"data"`
		Model  string  `json:"model"`
	}{Object: "list", Model: "text-embedding-3-small"}
	for i, text := range req.Input {
		v := make([]float32, req.Dimensions)
		for j, c := range []byte(text) {
			v[(j+int(c))%len(v)] += 1
		}
		out.Data = append(out.Data, datum{Object: "embedding", Index: i, Embedding: v})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

func (u *cellUpstream) chat(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	json.NewDecoder(r.Body).Decode(&req)
	var all strings.Builder
	last := ""
	for _, m := range req.Messages {
		var s string
		json.Unmarshal(m.Content, &s)
		all.WriteString(s)
		if m.Role == "user" {
			last = s
		}
	}
	var c, t int
	if n, _ := fmt.Sscanf(last, "[c%d t%d]", &c, &t); n == 2 && !strings.HasSuffix(last, " off") && t > 0 {
		u.mu.Lock()
		u.prev[fmt.Sprintf("[c%d t%d]", c, t)] = strings.Contains(all.String(), fmt.Sprintf("[c%d t%d]", c, t-1))
		u.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"id":"chatcmpl-cell","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Noted."},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}`)
}

// recentTurns returns how many memory-on turns after the first included the
// previous turn, and how many such turns there were.
func (u *cellUpstream) recentTurns(convs, turns int) (with, later int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, ok := range u.prev {
		later++
		if ok {
			with++
		}
	}
	return with, later
}

func (u *cellUpstream) embedCalls() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls
}
