package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/memgate/memgate/eval/launch"
	"github.com/memgate/memgate/eval/standin"
	"github.com/memgate/memgate/internal/tokens"
)

const (
	model     = "gpt-4o-mini"
	appSystem = "You are a friendly personal assistant. Answer briefly."
)

// demoConfig makes compaction visible in a short conversation: a session is
// summarised once it holds more than four messages, keeping the newest two.
const demoConfig = `compaction:
  max_messages: 4
  keep_messages: 2
`

// run plays the script against a fresh gateway.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	gateway := fs.String("gateway", "", "gateway binary to run (default: go build ./cmd/gateway into a temp dir)")
	budget := fs.Int("budget", 1000, "X-Memory-Budget sent with each request, in tokens")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	counter, err := tokens.New(nil)
	if err != nil {
		return fmt.Errorf("tokens: %w", err)
	}
	dir, err := os.MkdirTemp("", "memgate-demo-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	bin := *gateway
	if bin == "" {
		root, err := launch.ModuleRoot()
		if err != nil {
			return err
		}
		fmt.Fprintln(stderr, "building the gateway (go build ./cmd/gateway)...")
		if bin, err = launch.Build(ctx, root, dir); err != nil {
			return err
		}
	}
	up := standin.New(standin.Options{})
	upSrv := httptest.NewServer(up)
	defer upSrv.Close()
	gw, err := launch.Start(ctx, launch.Options{Binary: bin, Dir: dir, UpstreamURL: upSrv.URL + "/v1", Config: demoConfig})
	if err != nil {
		return err
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer scancel()
		if err := gw.Stop(sctx); err != nil {
			fmt.Fprintln(stderr, "stop gateway:", err)
		}
	}()

	p := &printer{w: stdout}
	p.intro(gw.URL, upSrv.URL, *budget)
	system := rawMessage("system", appSystem)
	var all []json.RawMessage // every turn of every session: what "full history" would resend
	sent := 0
	for si, s := range script {
		conv := fmt.Sprintf("demo-s%d", si+1)
		p.session(si+1, s.when, conv)
		day, err := s.day()
		if err != nil {
			return err
		}
		for ti, text := range s.turns {
			u := rawMessage("user", text)
			// Each turn is dated as the script says it was said
			// (X-Memory-Timestamp), a few minutes apart, so recalled
			// passages carry the session's date.
			who := launch.Who{User: demoUser, Conversation: conv, Budget: *budget, At: day.Add(time.Duration(ti) * 3 * time.Minute), AtHeader: "X-Memory-Timestamp"}
			reply, err := gw.Chat(ctx, model, who, []json.RawMessage{system, u})
			if err != nil {
				return err
			}
			call, ok := up.LastChat()
			if !ok {
				return fmt.Errorf("the stand-in upstream received no chat request")
			}
			full := counter.Messages(model, append(append([]json.RawMessage{system}, all...), u))
			p.turn(text, call, reply, counter.Messages(model, raws(call)), full)
			all = append(all, u, rawMessage("assistant", reply.Content))
			sent++
			// Wait for the turn's after-save work (indexing, then fact
			// extraction and compaction in the side lane), not only its
			// save: a user pausing between turns gives it that time.
			wctx, wcancel := context.WithTimeout(ctx, time.Minute)
			err = gw.WaitEnriched(wctx, sent, func() bool { return up.Busy() == 0 })
			wcancel()
			if err != nil {
				return err
			}
		}
	}
	p.facts(ctx, gw.URL, demoUser)
	p.outro(up.Count(standin.KindSummary), up.Count(standin.KindFacts))
	return nil
}

// raws returns the raw messages of a recorded call.
func raws(c standin.Call) []json.RawMessage {
	out := make([]json.RawMessage, len(c.Messages))
	for i, m := range c.Messages {
		out[i] = m.Raw
	}
	return out
}

// rawMessage encodes a chat message.
func rawMessage(role, content string) json.RawMessage {
	b, _ := json.Marshal(struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}{role, content}) // two strings: cannot fail
	return b
}

// getJSON fetches url into v; it reports false on any failure (the demo
// then skips that part).
func getJSON(ctx context.Context, url string, v any) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	return json.NewDecoder(resp.Body).Decode(v) == nil
}

// indent prefixes every line of s.
func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}
