package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/engine"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// extractionMarker is in the fact extractor's system prompt; the fake
// upstream answers such requests with facts instead of a chat reply.
const extractionMarker = "You extract durable facts"

// recallUpstream answers chat completions with "ack: <last user text>" and
// fact-extraction requests with a city fact for each of Lisbon and Porto
// the user mentions (the last one wins), so supersession runs end to end.
func recallUpstream() http.Handler {
	chat := echoUpstream()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !bytes.Contains(body, []byte(extractionMarker)) {
			chat.ServeHTTP(w, r)
			return
		}
		facts := "[]"
		switch {
		case bytes.Contains(body, []byte("Porto")):
			facts = `[{"type":"profile","key":"city","value":"lives in Porto","confidence":0.9}]`
		case bytes.Contains(body, []byte("Lisbon")):
			facts = `[{"type":"profile","key":"city","value":"lives in Lisbon","confidence":0.9}]`
		}
		upstreamtest.Chat(upstreamtest.Reply{Content: `{"facts":` + facts + `}`}).ServeHTTP(w, r)
	})
}

// recallGateway is the gateway wired with recall as the lead wires it:
// store, recall hooks after each save (extraction, then indexing), the
// assembler with the Recaller, the management API.
type recallGateway struct {
	URL    string
	store  store
	recall *engine.Recall
}

// startRecallGateway wires cfg with recall and serves it until the test ends.
// Captures are saved directly (no queue) so the hooks run right after the
// reply.
func startRecallGateway(t *testing.T, cfg config.Config) *recallGateway {
	t.Helper()
	counter, err := sharedCounter()
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	ctx := context.Background()
	bk, err := openStore(ctx, cfg, nil, logger)
	if err != nil {
		t.Fatal(err)
	}
	st := bk.store
	t.Cleanup(func() { bk.close() })
	rl, err := openRecall(cfg, st, bk.embeddings, kept{}, logger)
	if err != nil {
		t.Fatal(err)
	}
	asm, err := newAssembler(cfg, withReads(cfg, st, nil), rl.Recaller, nil, counter, logger)
	if err != nil {
		t.Fatal(err)
	}
	capt := record.New(nil, record.WithHooks(st, rl.Hooks...), nil, logger, record.Options{})
	srv, err := newTestHTTP(cfg, &engine.Core{Store: st, Prompt: asm, Capturer: capt, Recall: rl.Manager, Collectors: rl.Collectors}, nil, logger)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		capt.Close(cctx)
	})
	return &recallGateway{URL: hs.URL, store: st, recall: rl}
}

// recallConfigs are storeConfigs (default memory.load_timeout: recall must
// fit in it) with compaction off, so only recall writes facts.
func recallConfigs(t *testing.T, up *upstreamtest.Server) map[string]func(t *testing.T) config.Config {
	out := map[string]func(t *testing.T) config.Config{}
	for name, mk := range storeConfigs(t, up) {
		out[name] = func(t *testing.T) config.Config {
			c := mk(t)
			c.Compaction.Enabled = false
			return c
		}
	}
	return out
}

// lastChatPrompt returns the text of every message of the last chat request
// upstream that was not a fact extraction.
func lastChatPrompt(t *testing.T, up *upstreamtest.Server) string {
	t.Helper()
	reqs := up.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Path != "/v1/chat/completions" || bytes.Contains(reqs[i].Body, []byte(extractionMarker)) {
			continue
		}
		var req struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(reqs[i].Body, &req); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, raw := range req.Messages {
			m, err := memory.ParseMessage(raw)
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString(m.Role + ": " + m.Content + "\n")
		}
		return b.String()
	}
	t.Fatal("no chat request reached the upstream")
	return ""
}

// eventually polls cond every 20ms until it holds or 60s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// apiCall sends a management API request and decodes the JSON answer into out.
func apiCall(t *testing.T, method, url string, headers map[string]string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %d %s", method, url, resp.StatusCode, b)
		}
	}
	return resp.StatusCode
}
