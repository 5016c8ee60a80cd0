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
	methodTruncate = "last-N truncation"
	methodBM25     = "BM25 over turns"
	methodFull     = "full history"
)

// bm25Heading introduces the BM25 baseline's passages.
const bm25Heading = "Earlier messages that may be relevant (date, speaker: message):"

// harness replays conversations through a running gateway and questions it.
type harness struct {
	o        options
	gw       *launch.Gateway
	up       *standin.Server
	counter  *tokens.Counter
	log      *slog.Logger
	sent     int // exchanges sent with memory on
	imported int // exchanges imported
}

// cell is one (budget, method) row of the report; budget 0 is no budget.
type cell struct {
	budget int
	method string
}

// results are everything the report shows.
type results struct {
	o          options
	tallies    map[cell]*score.Tally
	methods    []string // memgate rows, in order
	degraded   int
	overBudget int
	headerDiff int
	sideCalls  map[standin.Kind]int
	elapsed    time.Duration
	replay     time.Duration
	command    string
	details    []detail
	data       dataStats
}

// dataStats describe the generated conversations.
type dataStats struct {
	users, turns, questions, evidence int
	turnTokens, fullTokens            float64
	byType                            map[synth.QType]int
	byDepth                           map[string]int
}

// detail is one judged question, for the -details file.
type detail struct {
	User     string          `json:"user"`
	ID       string          `json:"id"`
	Type     synth.QType     `json:"type"`
	Question string          `json:"question"`
	Answer   string          `json:"answer"`
	Method   string          `json:"method"`
	Budget   int             `json:"budget"`
	Tokens   int             `json:"tokens"`
	Evidence []evidenceJudge `json:"evidence"`
}

// evidenceJudge is one evidence turn of a detail.
type evidenceJudge struct {
	Key     string `json:"key"`
	Depth   int    `json:"depth"`
	Covered bool   `json:"covered"`
	Dated   bool   `json:"dated,omitempty"`
}

// add records one judged question under method and budget.
func (r *results) add(c synth.Conversation, q synth.Question, method string, budget int, prompt []json.RawMessage, tokens int) {
	outs := score.Judge(c, q, toScore(prompt))
	t, ok := r.tallies[cell{budget, method}]
	if !ok {
		t = &score.Tally{}
		r.tallies[cell{budget, method}] = t
	}
	t.Add(outs, tokens)
	d := detail{User: c.User, ID: q.ID, Type: q.Type, Question: q.Text, Answer: q.Answer, Method: method, Budget: budget, Tokens: tokens}
	for i, o := range outs {
		d.Evidence = append(d.Evidence, evidenceJudge{Key: q.Evidence[i].Key, Depth: o.Depth, Covered: o.Covered, Dated: o.Dated})
	}
	r.details = append(r.details, d)
}

// replayAll delivers every conversation to memgate (imported or replayed,
// as -deliver says) and returns their histories (user and assistant
// messages, in order).
func (h *harness) replayAll(ctx context.Context, convs []synth.Conversation, system []json.RawMessage) ([][]json.RawMessage, error) {
	histories := make([][]json.RawMessage, len(convs))
	start := time.Now()
	for i, c := range convs {
		deliver := h.replay
		if h.o.deliver == deliverImport {
			deliver = h.importHistory
		}
		hist, err := deliver(ctx, c, system)
		if err != nil {
			return nil, fmt.Errorf("replay %s: %w", c.User, err)
		}
		histories[i] = hist
		h.log.Info("replayed", "user", c.User, "turns", len(hist), "elapsed", time.Since(start).Round(time.Millisecond))
	}
	if h.o.deliver != deliverImport {
		// Replayed turns were waited for until stored; their after-save
		// work (indexing, fact extraction, summaries) runs behind, the
		// side model's part in its own lane: every exchange is enriched
		// before the first question, as the imports are.
		wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		if err := h.gw.WaitEnriched(wctx, h.sent, func() bool { return h.up.Busy() == 0 }); err != nil {
			return nil, err
		}
	}
	return histories, nil
}

// replay sends every first-speaker turn of c, each in its session's
// conversation, as an application that sends only its newest message
// would, with the stand-in scripted to answer with the second speaker's
// turn; it waits after each until memgate has stored the exchange
// (replayAll then waits for their after-save work). It returns the whole
// history for the baselines.
func (h *harness) replay(ctx context.Context, c synth.Conversation, system []json.RawMessage) ([]json.RawMessage, error) {
	var hist []json.RawMessage
	for _, s := range c.Sessions {
		for i := 0; i+1 < len(s.Turns); i += 2 {
			user, reply := s.Turns[i], s.Turns[i+1]
			u := rawMessage("user", user.Text)
			msgs := append(append([]json.RawMessage{}, system...), u)
			h.up.Script(reply.Text)
			got, err := h.gw.Chat(ctx, h.o.model, launch.Who{User: c.User, Conversation: s.Conversation, At: user.At, AtHeader: h.o.saidAt}, msgs)
			if err != nil {
				return nil, err
			}
			if got.Content != reply.Text {
				return nil, fmt.Errorf("the gateway returned %q, not the scripted reply %q", got.Content, reply.Text)
			}
			h.sent++
			if err := h.waitProcessed(ctx, h.sent); err != nil {
				return nil, err
			}
			hist = append(hist, u, rawMessage("assistant", reply.Text))
		}
	}
	return hist, nil
}

// importHistory imports c, one session (conversation) at a time, each
// message with the time it was said, as a team migrating its chat history
// would; then it waits until memgate has run the after-save work (indexing,
// fact extraction, summaries) of every imported exchange. It returns the
// whole history for the baselines.
func (h *harness) importHistory(ctx context.Context, c synth.Conversation, _ []json.RawMessage) ([]json.RawMessage, error) {
	var hist []json.RawMessage
	for _, s := range c.Sessions {
		msgs := make([]launch.Said, 0, len(s.Turns))
		for _, t := range s.Turns {
			role := "user"
			if t.Speaker == 1 {
				role = "assistant"
			}
			msgs = append(msgs, launch.Said{Role: role, Content: t.Text, At: t.At})
			hist = append(hist, rawMessage(role, t.Text))
		}
		got, err := h.gw.Import(ctx, c.User, s.Conversation, msgs)
		if err != nil {
			return nil, err
		}
		if got.Stored != len(s.Turns)/2 {
			return nil, fmt.Errorf("import of %s stored %d exchanges, want %d", s.Conversation, got.Stored, len(s.Turns)/2)
		}
		h.imported += got.Stored
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := h.gw.WaitEnriched(wctx, h.imported, func() bool { return h.up.Busy() == 0 }); err != nil {
		return nil, err
	}
	return hist, nil
}

// probe asks every question of every conversation at every budget through
// memgate, in a new conversation or the user's last session (where), and
// records the outcomes under method. Questions are read-only (X-Memory-Mode:
// read), so they never change what later questions see.
func (h *harness) probe(ctx context.Context, convs []synth.Conversation, system []json.RawMessage, where, method string, res *results) error {
	for _, c := range convs {
		conv := c.User + "-questions"
		if where == probeLast {
			conv = c.Sessions[len(c.Sessions)-1].Conversation
		}
		for _, q := range c.Questions {
			qm := rawMessage("user", q.Text)
			for _, b := range h.o.budgets {
				prompt, reply, err := h.ask(ctx, launch.Who{User: c.User, Conversation: conv, Mode: "read", Budget: b}, system, qm, q.Text)
				if err != nil {
					return fmt.Errorf("question %s at %d: %w", q.ID, b, err)
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
				res.add(c, q, method, b, prompt, n)
			}
		}
	}
	return nil
}

// baselines judges the prompts of last-N truncation, BM25 over single turns
// (packed into the same budgets) and the full history, built from the
// replayed histories.
func baselines(o options, counter *tokens.Counter, convs []synth.Conversation, histories [][]json.RawMessage, system []json.RawMessage, res *results) {
	for i, c := range convs {
		var passages []string
		for _, s := range c.Sessions {
			for _, t := range s.Turns {
				passages = append(passages, fmt.Sprintf("[%s] %s: %s", s.Date.Format("2006-01-02"), c.Names[t.Speaker], t.Text))
			}
		}
		texts := make([]string, 0, len(passages))
		for _, s := range c.Sessions {
			for _, t := range s.Turns {
				texts = append(texts, t.Text)
			}
		}
		index := baseline.NewBM25(texts)
		for _, q := range c.Questions {
			qm := rawMessage("user", q.Text)
			full := baseline.Full(system, histories[i], qm)
			res.add(c, q, methodFull, 0, full, counter.Messages(o.model, full))
			ranked := index.Rank(q.Text)
			for _, b := range o.budgets {
				tr := baseline.Truncate(counter, o.model, system, histories[i], qm, b)
				res.add(c, q, methodTruncate, b, tr, counter.Messages(o.model, tr))
				bm := baseline.Pack(counter, o.model, system, qm, passages, ranked, b, bm25Heading)
				res.add(c, q, methodBM25, b, bm, counter.Messages(o.model, bm))
			}
		}
	}
}

// describe fills the data statistics.
func (r *results) describe(counter *tokens.Counter, model string, convs []synth.Conversation, histories [][]json.RawMessage, system []json.RawMessage) {
	d := dataStats{users: len(convs), byType: map[synth.QType]int{}, byDepth: map[string]int{}}
	var turnTokens, full int
	for i, c := range convs {
		for _, s := range c.Sessions {
			for _, t := range s.Turns {
				turnTokens += counter.Text(model, t.Text)
				d.turns++
			}
		}
		full += counter.Messages(model, append(append([]json.RawMessage{}, system...), histories[i]...))
		for _, q := range c.Questions {
			d.questions++
			for _, e := range q.Evidence {
				d.evidence++
				d.byType[q.Type]++
				d.byDepth[score.Bucket(c.Depth(e.Ref))]++
			}
		}
	}
	d.turnTokens = float64(turnTokens) / float64(max(1, d.turns))
	d.fullTokens = float64(full) / float64(max(1, len(convs)))
	r.data = d
}

// waitProcessed waits until the gateway has handled n exchanges and the
// stand-in upstream is answering nothing (no summary or extraction call
// under way).
func (h *harness) waitProcessed(ctx context.Context, n int) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return h.gw.WaitProcessed(ctx, n, func() bool { return h.up.Busy() == 0 })
}

// ask sends one question (memory read-only: questions are not stored) and
// returns the message list the upstream received.
func (h *harness) ask(ctx context.Context, who launch.Who, system []json.RawMessage, q json.RawMessage, question string) ([]json.RawMessage, launch.Reply, error) {
	msgs := append(append([]json.RawMessage{}, system...), q)
	reply, err := h.gw.Chat(ctx, h.o.model, who, msgs)
	if err != nil {
		return nil, reply, err
	}
	call, ok := h.up.LastChat()
	if !ok || len(call.Messages) == 0 || call.Messages[len(call.Messages)-1].Content != question {
		return nil, reply, fmt.Errorf("the upstream's last chat request is not this question")
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
