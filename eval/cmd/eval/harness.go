package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/memgate/memgate/eval/baseline"
	"github.com/memgate/memgate/eval/launch"
	"github.com/memgate/memgate/eval/score"
	"github.com/memgate/memgate/eval/standin"
	"github.com/memgate/memgate/eval/synth"
	"github.com/memgate/memgate/internal/tokens"
)

// appSystem is the application's own system prompt, sent with every turn.
const appSystem = "You are a friendly personal assistant. Answer briefly."

// The methods compared.
const (
	methodMemgate  = "memgate"
	methodPatterns = "memgate, no model facts"
	methodTruncate = "last-N truncation"
	methodFull     = "full history"
)

// harness replays conversations through a running gateway and probes it.
type harness struct {
	o       options
	gw      *launch.Gateway
	up      *standin.Server
	counter *tokens.Counter
	log     *slog.Logger
	sent    int // exchanges sent with memory on
}

// cell is one (budget, method) row of the report, for the probes of one
// style ("" for all); budget 0 is no budget.
type cell struct {
	budget int
	method string
	style  string
}

// results are everything the report shows.
type results struct {
	o          options
	tallies    map[cell]*score.Tally
	methods    []string // memgate variants measured, in order
	degraded   int
	overBudget int
	probes     int
	turns      int
	sideCalls  map[standin.Kind]int
	fullTokens float64
	headerDiff int
	elapsed    time.Duration
	command    string
	replay     time.Duration
	details    []detail
}

// detail is one judged probe, for the -details file.
type detail struct {
	User     string         `json:"user"`
	Item     string         `json:"item"`
	Category synth.Category `json:"category"`
	Style    string         `json:"style"`
	Question string         `json:"question"`
	Want     string         `json:"want"`
	Stale    []string       `json:"stale,omitempty"`
	Method   string         `json:"method"`
	Budget   int            `json:"budget"`
	Covered  bool           `json:"covered"`
	IsStale  bool           `json:"is_stale,omitempty"`
	Sources  []string       `json:"sources,omitempty"`
	Tokens   int            `json:"tokens"`
}

// add records one judged probe: in its row, in its row for the probe's
// style, and in the details.
func (r *results) add(user string, p synth.Probe, method string, budget int, o score.Outcome) {
	r.tally(cell{budget, method, ""}).Add(o)
	r.tally(cell{budget, method, p.Style}).Add(o)
	r.details = append(r.details, detail{User: user, Item: p.ItemID, Category: p.Category, Style: p.Style, Question: p.Question, Want: p.Want, Stale: p.Stale,
		Method: method, Budget: budget, Covered: o.Covered, IsStale: o.Stale, Sources: o.Sources, Tokens: o.Tokens})
}

func (r *results) tally(c cell) *score.Tally {
	t, ok := r.tallies[c]
	if !ok {
		t = &score.Tally{}
		r.tallies[c] = t
	}
	return t
}

// replayAll replays every conversation and returns their histories (user
// and assistant messages, in order).
func (h *harness) replayAll(ctx context.Context, convs []synth.Conversation, system []json.RawMessage) ([][]json.RawMessage, error) {
	histories := make([][]json.RawMessage, len(convs))
	start := time.Now()
	for i, c := range convs {
		hist, err := h.replay(ctx, c, system)
		if err != nil {
			return nil, fmt.Errorf("replay %s: %w", c.User, err)
		}
		histories[i] = hist
		h.log.Info("replayed", "user", c.User, "turns", len(hist)/2, "elapsed", time.Since(start).Round(time.Millisecond))
	}
	return histories, nil
}

// probe asks every probe of every conversation at every budget through
// memgate, in a new conversation or the user's last session (where), and
// records the outcomes under method. Probes are read-only (X-Memory-Mode:
// read), so they never change what later probes see.
func (h *harness) probe(ctx context.Context, convs []synth.Conversation, system []json.RawMessage, where, method string, res *results) error {
	for _, c := range convs {
		conv := c.User + "-probe"
		if where == probeLast {
			conv = c.Sessions[len(c.Sessions)-1].Conversation
		}
		for _, p := range c.Probes {
			q := rawMessage("user", p.Question)
			for _, b := range h.o.budgets {
				prompt, reply, err := h.ask(ctx, launch.Who{User: c.User, Conversation: conv, Mode: "read", Budget: b}, system, q, p.Question)
				if err != nil {
					return fmt.Errorf("probe %s at %d: %w", p.ItemID, b, err)
				}
				n := h.counter.Messages(h.o.model, prompt)
				if reply.TokensSent >= 0 && reply.TokensSent != n {
					res.headerDiff++
				}
				if reply.Degraded {
					res.degraded++
				}
				if reply.OverBudget {
					res.overBudget++
				}
				res.add(c.User, p, method, b, score.Judge(p, toScore(prompt), n))
			}
		}
	}
	return nil
}

// baselines judges the truncation and full-history prompts built from the
// replayed histories.
func baselines(o options, counter *tokens.Counter, convs []synth.Conversation, histories [][]json.RawMessage, system []json.RawMessage, res *results) {
	var fullSum float64
	for i, c := range convs {
		res.turns += len(histories[i]) / 2
		for _, p := range c.Probes {
			q := rawMessage("user", p.Question)
			full := baseline.Full(system, histories[i], q)
			ft := counter.Messages(o.model, full)
			fullSum += float64(ft)
			res.add(c.User, p, methodFull, 0, score.Judge(p, toScore(full), ft))
			for _, b := range o.budgets {
				tr := baseline.Truncate(counter, o.model, system, histories[i], q, b)
				res.add(c.User, p, methodTruncate, b, score.Judge(p, toScore(tr), counter.Messages(o.model, tr)))
			}
			res.probes++
		}
	}
	res.fullTokens = fullSum / float64(max(1, res.probes))
}

// replay sends every user turn of c, each in its session's conversation,
// as an application that sends only its newest message would, and waits
// after each until memgate has stored it and run its after-save work. It
// returns the whole history (user and assistant messages) for the baselines.
func (h *harness) replay(ctx context.Context, c synth.Conversation, system []json.RawMessage) ([]json.RawMessage, error) {
	var hist []json.RawMessage
	for _, s := range c.Sessions {
		for _, turn := range s.Turns {
			u := rawMessage("user", turn)
			msgs := append(append([]json.RawMessage{}, system...), u)
			reply, err := h.gw.Chat(ctx, h.o.model, launch.Who{User: c.User, Conversation: s.Conversation}, msgs)
			if err != nil {
				return nil, err
			}
			h.sent++
			if err := h.waitProcessed(ctx, h.sent); err != nil {
				return nil, err
			}
			hist = append(hist, u, rawMessage("assistant", reply.Content))
		}
	}
	return hist, nil
}

// waitProcessed waits until the gateway has handled n exchanges and the
// stand-in upstream is answering nothing (no summary or extraction call
// under way).
func (h *harness) waitProcessed(ctx context.Context, n int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return h.gw.WaitProcessed(ctx, n, func() bool { return h.up.Busy() == 0 })
}

// ask sends one probe (memory read-only: probes are not stored) and returns
// the message list the upstream received.
func (h *harness) ask(ctx context.Context, who launch.Who, system []json.RawMessage, q json.RawMessage, question string) ([]json.RawMessage, launch.Reply, error) {
	msgs := append(append([]json.RawMessage{}, system...), q)
	reply, err := h.gw.Chat(ctx, h.o.model, who, msgs)
	if err != nil {
		return nil, reply, err
	}
	call, ok := h.up.LastChat()
	if !ok || len(call.Messages) == 0 || call.Messages[len(call.Messages)-1].Content != question {
		return nil, reply, fmt.Errorf("the upstream's last chat request is not this probe")
	}
	out := make([]json.RawMessage, len(call.Messages))
	for i, m := range call.Messages {
		out[i] = m.Raw
	}
	return out, reply, nil
}

// rawMessage encodes a chat message.
func rawMessage(role, content string) json.RawMessage {
	b, _ := json.Marshal(struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}{role, content}) // two strings: cannot fail
	return b
}

// toScore reads role and text of each message.
func toScore(msgs []json.RawMessage) []score.Message {
	out := make([]score.Message, len(msgs))
	for i, raw := range msgs {
		var m struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		}
		_ = json.Unmarshal(raw, &m) // our own or the gateway's messages: text content
		out[i] = score.Message{Role: m.Role, Content: m.Content}
	}
	return out
}
