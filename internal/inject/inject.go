// Package inject decides what the upstream sees: the client's messages, with
// the conversation's stored history put back in when the client sent only its
// newest turn ("zero-code memory").
package inject

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/memgate/memgate/internal/memory"
)

// HistoryReader loads a conversation's stored messages.
type HistoryReader interface {
	// Recent returns up to n newest live messages, oldest first.
	Recent(ctx context.Context, id memory.Identity, n int) ([]memory.Message, error)
}

// TokenCounter counts what a list of chat messages costs for a model.
// *tokens.Counter implements it.
type TokenCounter interface {
	Messages(model string, msgs []json.RawMessage) int
}

// Options tunes an Assembler.
type Options struct {
	// RecentMessages bounds how many stored messages are put back into a
	// request that carries only new messages; 0 injects nothing.
	RecentMessages int
}

// Assembler prepares upstream requests. It is safe for concurrent use.
type Assembler struct {
	history HistoryReader
	counter TokenCounter
	opts    Options
	logger  *slog.Logger
}

// New returns an Assembler. counter may be nil (token counts are then 0),
// and logger may be nil.
func New(history HistoryReader, counter TokenCounter, opts Options, logger *slog.Logger) *Assembler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Assembler{history: history, counter: counter, opts: opts, logger: logger}
}

// Prepare returns the messages to send upstream for req.
//
// A client that sent history of its own (an assistant message before its
// current turn) gets its messages back unchanged. So does a request whose
// mode does not inject, or that names no user or conversation. Otherwise the
// conversation's newest RecentMessages stored messages are loaded and the
// result is: the client's system and developer messages (in order,
// untouched), then the stored history (each message's Raw), then the
// client's other messages. The history never starts with a tool result whose
// call was cut off, and never leaves a tool call unanswered.
//
// TokensOriginal counts the client's messages plus all loaded history;
// TokensSent counts the result. A failure to load history is returned
// wrapped, and the caller forwards the request without memory.
func (a *Assembler) Prepare(ctx context.Context, req memory.Request) (memory.Prepared, error) {
	parsed, err := parsedMessages(req)
	if err != nil {
		return memory.Prepared{}, err
	}
	var system []json.RawMessage
	var rest []json.RawMessage
	var restParsed []memory.Message
	for i, m := range parsed {
		if memory.IsSystem(m.Role) {
			system = append(system, req.Messages[i])
			continue
		}
		rest = append(rest, req.Messages[i])
		restParsed = append(restParsed, m)
	}
	unchanged := func() memory.Prepared {
		n := a.count(req.Model, req.Messages)
		return memory.Prepared{Messages: req.Messages, TokensOriginal: n, TokensSent: n}
	}
	prior, _ := memory.SplitTurn(restParsed)
	if len(prior) > 0 || !req.Mode.Injects() || req.User == "" || req.Conversation == "" || a.opts.RecentMessages <= 0 {
		return unchanged(), nil
	}
	stored, err := a.history.Recent(ctx, req.Identity, a.opts.RecentMessages)
	if err != nil {
		return memory.Prepared{}, fmt.Errorf("load recent history: %w", err)
	}
	history := usableHistory(stored, restParsed)
	if len(history) == 0 {
		return unchanged(), nil
	}
	out := make([]json.RawMessage, 0, len(system)+len(history)+len(rest))
	out = append(out, system...)
	out = append(out, history...)
	out = append(out, rest...)
	sent := a.count(req.Model, out)
	original := sent
	if len(history) != len(stored) {
		all := make([]json.RawMessage, 0, len(req.Messages)+len(stored))
		all = append(all, req.Messages...)
		for _, m := range stored {
			all = append(all, rawOf(m))
		}
		original = a.count(req.Model, all)
	}
	a.logger.DebugContext(ctx, "history injected", "conversation", req.Conversation,
		"stored", len(stored), "injected", len(history), "tokens", sent)
	return memory.Prepared{
		Messages:       out,
		TokensOriginal: original,
		TokensSent:     sent,
	}, nil
}

// count returns what msgs cost, or 0 without a counter.
func (a *Assembler) count(model string, msgs []json.RawMessage) int {
	if a.counter == nil {
		return 0
	}
	return a.counter.Messages(model, msgs)
}

// parsedMessages returns req.Parsed, parsing req.Messages when the proxy did
// not.
func parsedMessages(req memory.Request) ([]memory.Message, error) {
	if len(req.Parsed) == len(req.Messages) {
		return req.Parsed, nil
	}
	out := make([]memory.Message, len(req.Messages))
	for i, raw := range req.Messages {
		m, err := memory.ParseMessage(raw)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		out[i] = m
	}
	return out, nil
}
