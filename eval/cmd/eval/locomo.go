package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/memgate/memgate/eval/baseline"
	"github.com/memgate/memgate/eval/launch"
	"github.com/memgate/memgate/eval/locomo"
	"github.com/memgate/memgate/eval/standin"
	"github.com/memgate/memgate/internal/tokens"
	"gopkg.in/yaml.v3"
)

// The clients a LoCoMo replay plays.
const (
	// clientNewest sends X-Memory-Conversation and only its newest message.
	clientNewest = "newest"
	// clientFull resends the whole session so far and no conversation
	// header (the gateway derives the conversation).
	clientFull = "full"
)

// The -side-model choices.
const (
	// sideStandIn: the gateway has an upstream key, so its side models
	// (summariser, fact extraction) are the stand-in upstream.
	sideStandIn = "stand-in"
	// sideNone: the gateway has no key of its own (the client's is
	// forwarded), so it summarises extractively and extracts facts by
	// pattern alone.
	sideNone = "none"
)

// The -pace choices.
const (
	// paceEnriched sends an exchange once the previous one is enriched.
	paceEnriched = "enriched"
	// paceSaved sends an exchange once the previous one is saved.
	paceSaved = "saved"
)

// loDeadline is -timeout's default with -locomo: the ten conversations'
// 3,000 exchanges and 1,500 questions per client, with the built-in
// sentence encoder embedding every message on a busy 2-core machine.
const loDeadline = 90 * time.Minute

// loEnrichWait bounds the wait, after a replay, for enrichment to catch up
// with the exchanges sent (the sentence encoder embeds ~60 messages per
// CPU-second: the ten conversations' 6,000 messages on a busy machine).
const loEnrichWait = 30 * time.Minute

// prefixMinChars: prompts shorter than this are left out of the prefix
// share (issue 28 counts prompts of 4,000 characters or more).
const prefixMinChars = 4000

// parseLoCoMoFlags reads -conversations and -client.
func parseLoCoMoFlags(o *options, pick, clients string) error {
	for _, f := range strings.Split(pick, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return fmt.Errorf("-conversations: %q is not a 1-based conversation number", f)
		}
		o.locomoPick = append(o.locomoPick, n)
	}
	for _, f := range strings.Split(clients, ",") {
		f = strings.TrimSpace(f)
		if f != clientNewest && f != clientFull {
			return fmt.Errorf("-client: %q is not newest or full", f)
		}
		o.locomoClients = append(o.locomoClients, f)
	}
	if o.pace != paceEnriched && o.pace != paceSaved {
		return fmt.Errorf("-pace: %q is not enriched or saved", o.pace)
	}
	if o.questionMode != "read" && o.questionMode != "on" {
		return fmt.Errorf("-question-mode %q: want read or on", o.questionMode)
	}
	if o.locomoBudget <= 0 {
		return fmt.Errorf("-locomo-budget must be positive")
	}
	return nil
}

// loResults are what the LoCoMo report shows.
type loResults struct {
	o        options
	command  string
	elapsed  time.Duration
	convs    []locomo.Conversation
	clients  []*loClient
	baseline map[string]*locomo.Tally // by method
	details  []loDetail
}

// loClient is the measurement of one client's replay.
type loClient struct {
	name      string
	tally     *locomo.Tally
	replay    time.Duration
	exchanges int
	// partTokens sums each prompt part's tokens over the judged prompts.
	partTokens map[string]int
	// prefix sums the prefix shares of the replayed prompts counted
	// (prefixN of them, prefixSkipped shorter than prefixMinChars).
	prefix                 float64
	prefixN, prefixSkipped int
	// breaks counts the counted prompts by where each stops repeating
	// the previous one (locomo.PrefixBreak), and lost sums, by the same
	// place, what each such prompt does not repeat (1 − its share).
	breaks               map[string]int
	lost                 map[string]float64
	degraded, overHeader int
	// enrichFailures counts the failed enrichment rounds and claims
	// (memgate_enrich_failures_total, every stage) before the questions:
	// a round given up leaves turns unembedded or unsummarised.
	enrichFailures int
	sideCalls      map[standin.Kind]int
}

// loDetail is one judged question, for -details.
type loDetail struct {
	Conversation string   `json:"conversation"`
	Method       string   `json:"method"`
	Category     int      `json:"category"`
	Question     string   `json:"question"`
	Answer       string   `json:"answer"`
	Tokens       int      `json:"tokens"`
	Evidence     []string `json:"evidence"`
	SessionsAgo  []int    `json:"sessions_ago"`
	Covered      []bool   `json:"covered"`
	// Prompt is what the upstream received, with -details-prompts.
	Prompt []locomo.Message `json:"prompt,omitempty"`
}

// runLoCoMo measures the LoCoMo conversations of o.locomo, with each client
// of o.locomoClients on a fresh gateway, and the baselines.
func runLoCoMo(ctx context.Context, o options, args []string, bin, dir, extra string, counter *tokens.Counter,
	log *slog.Logger, stdout io.Writer, started time.Time) error {
	all, err := locomo.Load(o.locomo)
	if err != nil {
		return err
	}
	convs := all
	if len(o.locomoPick) > 0 {
		convs = nil
		for _, n := range o.locomoPick {
			if n > len(all) {
				return fmt.Errorf("-conversations: %d, but %s holds %d", n, o.locomo, len(all))
			}
			convs = append(convs, all[n-1])
		}
	}
	if o.pace == paceEnriched && o.enrichInterval > 0 {
		if extra, err = withDefault(extra, []string{"capture", "enrich_interval"}, o.enrichInterval.String()); err != nil {
			return err
		}
	}
	res := &loResults{o: o, convs: convs, baseline: map[string]*locomo.Tally{}}
	system := []json.RawMessage{rawMessage("system", appSystem)}
	for _, client := range o.locomoClients {
		cdir := filepath.Join(dir, "locomo-"+client)
		if err := os.MkdirAll(cdir, 0o755); err != nil {
			return fmt.Errorf("temp dir: %w", err)
		}
		lc, err := measureLoCoMo(ctx, o, bin, cdir, extra, counter, log, convs, system, client, res)
		if err != nil {
			return err
		}
		res.clients = append(res.clients, lc)
	}
	loBaselines(o, counter, convs, system, res)
	res.elapsed = time.Since(started)
	res.command = displayCommand(args)
	if o.details != "" {
		var b strings.Builder
		enc := json.NewEncoder(&b)
		for _, d := range res.details {
			if err := enc.Encode(d); err != nil {
				return fmt.Errorf("encode details: %w", err)
			}
		}
		if err := os.WriteFile(o.details, []byte(b.String()), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", o.details, err)
		}
	}
	report := res.markdown()
	fmt.Fprint(stdout, report)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(report), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", o.out, err)
		}
	}
	return nil
}

// loUser is the memgate user a LoCoMo conversation is replayed as.
func loUser(c locomo.Conversation) string { return "locomo-" + c.ID }

// exchangeAt is when exchange i of a session was said: the session's date
// and a minute per exchange, so the stored order is the said order.
func exchangeAt(date time.Time, i int) time.Time { return date.Add(time.Duration(i) * time.Minute) }

// questionAt is when a conversation's questions are asked: a minute after
// its last exchange.
func questionAt(c locomo.Conversation) time.Time {
	last := len(c.Sessions) - 1
	return exchangeAt(c.Sessions[last].Date, len(c.Exchanges(last))+1)
}

// measureLoCoMo replays convs as client on a fresh gateway, then asks their
// questions of categories 1–4 and judges the prompts.
func measureLoCoMo(ctx context.Context, o options, bin, dir, extra string, counter *tokens.Counter, log *slog.Logger,
	convs []locomo.Conversation, system []json.RawMessage, client string, res *loResults) (lc *loClient, err error) {
	st, err := startStack(ctx, o, bin, dir, extra, log)
	if err != nil {
		return nil, err
	}
	defer func() { err = st.stop(err) }()
	lc = &loClient{name: client, tally: locomo.NewTally(), partTokens: map[string]int{}, sideCalls: map[standin.Kind]int{}}
	h := &harness{o: o, gw: st.gw, up: st.up, counter: counter, log: log}
	start := time.Now()
	for _, c := range convs {
		if err := loReplay(ctx, h, c, system, client, lc); err != nil {
			return nil, fmt.Errorf("replay %s: %w", c.ID, err)
		}
		log.Info("replayed", "conversation", c.ID, "client", client, "exchanges", lc.exchanges, "elapsed", time.Since(start).Round(time.Millisecond))
	}
	// Enrichment (indexing: each turn's embedding; facts; summaries) runs
	// behind the saves: the questions wait until it has caught up, so the
	// last conversation replayed is as recallable as the first, whatever
	// the embedder's speed and the machine's load.
	lc.replay = time.Since(start)
	wctx, cancel := context.WithTimeout(ctx, loEnrichWait)
	err = h.gw.WaitEnriched(wctx, h.sent, func() bool { return h.up.Busy() == 0 })
	cancel()
	if err != nil {
		return nil, fmt.Errorf("wait for enrichment: %w", err)
	}
	failed, err := h.gw.Metric(ctx, "memgate_enrich_failures_total")
	if err != nil {
		return nil, fmt.Errorf("enrichment failures: %w", err)
	}
	lc.enrichFailures = int(failed)
	method := "memgate, " + client + " client"
	for _, c := range convs {
		if err := loProbe(ctx, h, c, system, client, method, lc, res); err != nil {
			return nil, fmt.Errorf("questions of %s: %w", c.ID, err)
		}
	}
	for _, k := range []standin.Kind{standin.KindSummary, standin.KindFacts, standin.KindJSON} {
		lc.sideCalls[k] = st.up.Count(k)
	}
	return lc, nil
}

// loReplay sends every exchange of c as client would, the stand-in scripted
// to answer with the assistant's turns, each dated by X-Memory-Timestamp,
// waiting after each until memgate has stored it and run its after-save
// work; it adds each prompt's prefix share to lc.
func loReplay(ctx context.Context, h *harness, c locomo.Conversation, system []json.RawMessage, client string, lc *loClient) error {
	user := loUser(c)
	prev := map[string]string{} // the previous prompt of each conversation
	prevMsgs := map[string][]locomo.Message{}
	for si, s := range c.Sessions {
		var hist []json.RawMessage
		who := launch.Who{User: user, Conversation: user, AtHeader: "X-Memory-Timestamp"}
		key := user
		if client == clientFull {
			who.Conversation = ""
			key = user + "/" + strconv.Itoa(s.N)
		}
		for i, e := range clientExchanges(c, si, client) {
			u := rawMessage("user", e.User)
			msgs := append(append(append([]json.RawMessage{}, system...), hist...), u)
			who.At = exchangeAt(s.Date, i)
			h.up.Script(e.Reply)
			got, err := h.gw.Chat(ctx, h.o.model, who, msgs)
			if err != nil {
				return err
			}
			if got.Content != e.Reply {
				return fmt.Errorf("the gateway returned %q, not the scripted reply %q", got.Content, e.Reply)
			}
			h.sent++
			lc.exchanges++
			if err := h.waitProcessed(ctx, h.sent); err != nil {
				return err
			}
			if h.o.pace == paceEnriched {
				// Each exchange is enriched on its own, as when a
				// conversation spans months: what enrichment writes
				// (summaries, facts) is then the same in every run.
				wctx, cancel := context.WithTimeout(ctx, time.Minute)
				err := h.gw.WaitEnriched(wctx, h.sent, func() bool { return h.up.Busy() == 0 })
				cancel()
				if err != nil {
					return err
				}
			}
			call, ok := h.up.LastChat()
			if !ok {
				return fmt.Errorf("the upstream saw no chat request")
			}
			h.up.Reset()
			prompt := promptBytes(call)
			seen := make([]locomo.Message, len(call.Messages))
			for i, m := range call.Messages {
				seen[i] = locomo.Message{Role: m.Role, Content: m.Content}
			}
			if p, ok := prev[key]; ok {
				if len(prompt) >= prefixMinChars {
					share := locomo.PrefixShare(p, prompt)
					lc.prefix += share
					lc.prefixN++
					if lc.breaks == nil {
						lc.breaks, lc.lost = map[string]int{}, map[string]float64{}
					}
					at := locomo.PrefixBreak(prevMsgs[key], seen)
					lc.breaks[at]++
					lc.lost[at] += 1 - share
				} else {
					lc.prefixSkipped++
				}
			}
			prev[key], prevMsgs[key] = prompt, seen
			if err := h.writeReplayPrompt(c.ID, client, seen); err != nil {
				return err
			}
			if client == clientFull {
				hist = append(hist, u, rawMessage("assistant", e.Reply))
			}
		}
	}
	return nil
}

// promptBytes is the prompt as the upstream received it: its messages'
// JSON, in order, one per line.
func promptBytes(call standin.Call) string {
	var b strings.Builder
	for _, m := range call.Messages {
		b.Write(m.Raw)
		b.WriteByte('\n')
	}
	return b.String()
}

// clientExchanges are the exchanges of c's session si as client sends them.
// A full-history client has no conversation header: the gateway tells its
// chats apart by their system prompt and first user message, so a session
// the assistant opens starts with a user message naming the session's date
// (as a chat app's date separator would) instead of the bare placeholder,
// which every such session would share.
func clientExchanges(c locomo.Conversation, si int, client string) []locomo.Exchange {
	ex := c.Exchanges(si)
	if client == clientFull && len(ex) > 0 && ex[0].User == locomo.Placeholder {
		ex[0].User = "(" + c.Sessions[si].Date.Format("3:04 pm on 2 January, 2006") + ")"
	}
	return ex
}

// loHistory is c's whole history as client replays it (user and assistant
// messages) and the messages of its last session.
func loHistory(c locomo.Conversation, client string) (all, last []json.RawMessage) {
	for si := range c.Sessions {
		last = last[:0:0]
		for _, e := range clientExchanges(c, si, client) {
			m := []json.RawMessage{rawMessage("user", e.User), rawMessage("assistant", e.Reply)}
			all = append(all, m...)
			last = append(last, m...)
		}
	}
	return all, last
}

// asked reports whether a question is measured: categories 1–4 with at
// least one evidence turn found.
func asked(q locomo.Question) bool { return q.Category >= 1 && q.Category <= 4 && len(q.Evidence) > 0 }

// loProbe asks c's questions through memgate, read-only at the question
// budget, as client would (the newest client in c's conversation, the full
// client resending c's last session), and judges what reached the upstream.
func loProbe(ctx context.Context, h *harness, c locomo.Conversation, system []json.RawMessage, client, method string, lc *loClient, res *loResults) error {
	user := loUser(c)
	mode := h.o.questionMode
	if mode == "on" {
		mode = ""
	}
	who := launch.Who{User: user, Conversation: user, Mode: mode, Budget: h.o.locomoBudget, At: questionAt(c), AtHeader: "X-Memory-Timestamp"}
	var before []json.RawMessage
	if client == clientFull {
		who.Conversation = ""
		_, before = loHistory(c, client)
	}
	for _, q := range c.Questions {
		if !asked(q) {
			continue
		}
		msgs := append(append(append([]json.RawMessage{}, system...), before...), rawMessage("user", q.Text))
		reply, err := h.gw.Chat(ctx, h.o.model, who, msgs)
		if err != nil {
			return err
		}
		call, ok := h.up.LastChat()
		if !ok || len(call.Messages) == 0 || call.Messages[len(call.Messages)-1].Content != q.Text {
			return fmt.Errorf("the upstream's last chat request is not the question %q", q.Text)
		}
		h.up.Reset()
		raw := make([]json.RawMessage, len(call.Messages))
		prompt := make([]locomo.Message, len(call.Messages))
		for i, m := range call.Messages {
			raw[i] = m.Raw
			prompt[i] = locomo.Message{Role: m.Role, Content: m.Content}
		}
		n := h.counter.Messages(h.o.model, raw)
		if reply.Degraded {
			lc.degraded++
		}
		if reply.OverBudget {
			lc.overHeader++
		}
		for part, text := range locomo.Split(prompt) {
			lc.partTokens[part] += h.counter.Text(h.o.model, text)
		}
		res.judge(c, q, method, lc.tally, prompt, n, h.o.locomoBudget)
	}
	return nil
}

// judge scores one question's prompt under method into t.
func (r *loResults) judge(c locomo.Conversation, q locomo.Question, method string, t *locomo.Tally, prompt []locomo.Message, tokens, budget int) {
	var text strings.Builder
	for _, m := range prompt[:len(prompt)-1] { // the question itself is not evidence
		text.WriteString(m.Content)
		text.WriteByte('\n')
	}
	p := locomo.NewPrompt(text.String())
	d := loDetail{Conversation: c.ID, Method: method, Category: q.Category, Question: q.Text, Answer: q.Answer, Tokens: tokens}
	last := len(c.Sessions) - 1
	for _, ref := range q.Evidence {
		turn := c.Turn(ref)
		ok := p.Covered(turn.Text)
		t.Add(q.Category, last-ref.Session, ok)
		d.Evidence = append(d.Evidence, turn.ID)
		d.SessionsAgo = append(d.SessionsAgo, last-ref.Session)
		d.Covered = append(d.Covered, ok)
	}
	t.AddPrompt(tokens, budget)
	if r.o.detailsPrompts {
		d.Prompt = prompt
	}
	if r.o.details != "" {
		r.details = append(r.details, d)
	}
}

// The baselines' method names.
const (
	loBM25     = "BM25 over single turns"
	loTruncate = "last-N truncation"
)

// loBaselines judges, for every question, BM25 over c's single turns and
// last-N truncation of the whole replayed history, packed into the same
// budget with the same tokenizer.
func loBaselines(o options, counter *tokens.Counter, convs []locomo.Conversation, system []json.RawMessage, res *loResults) {
	bm, tr := locomo.NewTally(), locomo.NewTally()
	res.baseline[loBM25], res.baseline[loTruncate] = bm, tr
	for _, c := range convs {
		var passages, texts []string
		for _, s := range c.Sessions {
			for _, t := range s.Turns {
				passages = append(passages, fmt.Sprintf("[%s] %s: %s", s.Date.Format("2006-01-02"), c.Speakers[t.Speaker], t.Text))
				texts = append(texts, t.Text)
			}
		}
		index := baseline.NewBM25(texts)
		hist, _ := loHistory(c, clientNewest)
		for _, q := range c.Questions {
			if !asked(q) {
				continue
			}
			qm := rawMessage("user", q.Text)
			packed := baseline.Pack(counter, o.model, system, qm, passages, index.Rank(q.Text), o.locomoBudget, bm25Heading)
			res.judge(c, q, loBM25, bm, toLoCoMo(packed), counter.Messages(o.model, packed), o.locomoBudget)
			cut := baseline.Truncate(counter, o.model, system, hist, qm, o.locomoBudget)
			res.judge(c, q, loTruncate, tr, toLoCoMo(cut), counter.Messages(o.model, cut), o.locomoBudget)
		}
	}
}

// toLoCoMo reads role and text of each message.
func toLoCoMo(msgs []json.RawMessage) []locomo.Message {
	out := make([]locomo.Message, len(msgs))
	for i, m := range toScore(msgs) {
		out[i] = locomo.Message{Role: m.Role, Content: m.Content}
	}
	return out
}

// writeReplayPrompt appends a replayed exchange's prompt to the
// -replay-prompts file, when one is set.
func (h *harness) writeReplayPrompt(conversation, client string, prompt []locomo.Message) error {
	if h.o.replayPrompts == "" {
		return nil
	}
	f, err := os.OpenFile(h.o.replayPrompts, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("replay prompts: %w", err)
	}
	line, err := json.Marshal(struct {
		Conversation string           `json:"conversation"`
		Client       string           `json:"client"`
		Prompt       []locomo.Message `json:"prompt"`
	}{conversation, client, prompt})
	if err != nil {
		f.Close()
		return fmt.Errorf("replay prompts: %w", err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("replay prompts: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("replay prompts: %w", err)
	}
	return nil
}

// withDefault returns the YAML config cfg with value at path (keys of
// nested mappings) unless cfg sets it already.
func withDefault(cfg string, path []string, value string) (string, error) {
	root := map[string]any{}
	if err := yaml.Unmarshal([]byte(cfg), &root); err != nil {
		return "", fmt.Errorf("gateway config: %w", err)
	}
	if root == nil {
		root = map[string]any{}
	}
	m := root
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			if m[k] != nil {
				return "", fmt.Errorf("gateway config: %s is not a mapping", k)
			}
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	last := path[len(path)-1]
	if _, ok := m[last]; ok {
		return cfg, nil
	}
	m[last] = value
	b, err := yaml.Marshal(root)
	if err != nil {
		return "", fmt.Errorf("gateway config: %w", err)
	}
	return string(b), nil
}
