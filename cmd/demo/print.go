package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/memgate/memgate/eval/launch"
	"github.com/memgate/memgate/eval/standin"
)

// printer writes the demo's narration.
type printer struct {
	w io.Writer
}

func (p *printer) intro(gateway, upstream string, budget int) {
	fmt.Fprintf(p.w, `memgate demo
============
memgate (the real gateway binary, embedded SQLite store in a temp dir) listens on %s.
Upstream: %s — a STAND-IN, not a language model. It answers chat turns with
generic sentences, and answers memgate's own summary and fact-extraction calls
with extractive, pattern-based JSON. Everything memory-related below is memgate.

The app sends only its system prompt and the newest user message; memgate adds
the memory. Each request carries X-Memory-Budget: %d.
`, gateway, upstream, budget)
}

func (p *printer) session(n int, when, conv string) {
	fmt.Fprintf(p.w, "\n\n══════ Session %d · %s · conversation %q ══════\n", n, when, conv)
}

// turn prints one exchange: the user's message, the message list memgate
// sent upstream, the accounting, and the stand-in's reply.
func (p *printer) turn(user string, call standin.Call, reply launch.Reply, sent, full int) {
	fmt.Fprintf(p.w, "\nuser › %s\n", user)
	fmt.Fprintf(p.w, "  memgate sent upstream %d messages:\n", len(call.Messages))
	for i, m := range call.Messages {
		label := fmt.Sprintf("%-12s", "["+m.Role+"]")
		switch {
		case i == 0 && m.Role == "system":
			fmt.Fprintf(p.w, "    %s(the app's own prompt) %s\n", label, m.Content)
		case m.Role == "system" && strings.Contains(m.Content, "<memory>"):
			fmt.Fprintf(p.w, "    %smemory block added by memgate:\n%s\n", label, indent(m.Content, "      │ "))
		case i == len(call.Messages)-1:
			fmt.Fprintf(p.w, "    %s(newest turn) %s\n", label, short(m.Content, 90))
		default:
			fmt.Fprintf(p.w, "    %s%s\n", label, short(m.Content, 90))
		}
	}
	fmt.Fprintf(p.w, "  tokens: %d sent upstream · the whole history of all sessions would be %d", sent, full)
	if reply.TokensSent >= 0 {
		fmt.Fprintf(p.w, " · headers X-Memory-Tokens-Sent=%d X-Memory-Tokens-Original=%d", reply.TokensSent, reply.TokensOriginal)
	}
	if reply.Degraded {
		fmt.Fprint(p.w, " · X-Memory-Degraded (a memory part not loaded in time)")
	}
	fmt.Fprintf(p.w, "\nassistant (stand-in) › %s\n", short(reply.Content, 110))
}

// facts prints what memgate stored about the user, through the management
// API.
func (p *printer) facts(ctx context.Context, gateway, user string) {
	var body struct {
		Data []struct {
			Type   string `json:"type"`
			Key    string `json:"key"`
			Value  string `json:"value"`
			Pinned bool   `json:"pinned"`
		} `json:"data"`
	}
	if !getJSON(ctx, gateway+"/v1/memory/users/"+user+"/facts", &body) {
		return
	}
	fmt.Fprintf(p.w, "\n\nFacts memgate holds about %q now (GET /v1/memory/users/%s/facts):\n", user, user)
	for _, f := range body.Data {
		pin := ""
		if f.Pinned {
			pin = " (pinned)"
		}
		fmt.Fprintf(p.w, "  - %s/%s: %s%s\n", f.Type, f.Key, f.Value, pin)
	}
}

func (p *printer) outro(summaries, extractions int) {
	fmt.Fprintf(p.w, "\nThe stand-in answered %d summary and %d fact-extraction calls from memgate.\n", summaries, extractions)
	fmt.Fprintln(p.w, "Point a real OpenAI-compatible upstream at memgate with `make run` (GATEWAY_UPSTREAM_BASE_URL) to try it for real.")
}

// short cuts s to n runes on one line.
func short(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
