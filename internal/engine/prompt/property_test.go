package prompt

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/tokens"
)

var realCounter = sync.OnceValues(func() (*tokens.Counter, error) { return tokens.New(nil) })

func mustCounter(tb testing.TB) *tokens.Counter {
	tb.Helper()
	c, err := realCounter()
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// fakeMemory serves every store read the Assembler makes.
type fakeMemory struct {
	stored  []memory.Message
	summary *memory.Summary
	facts   []memory.Fact
}

func (f *fakeMemory) Recent(_ context.Context, _ *memory.Revisions, _ memory.Identity, n int) ([]memory.Message, error) {
	return f.stored[max(0, len(f.stored)-n):], nil
}

func (f *fakeMemory) LatestSummary(context.Context, *memory.Revisions, memory.Identity) (memory.Summary, error) {
	if f.summary == nil {
		return memory.Summary{}, memory.ErrNotFound
	}
	return *f.summary, nil
}

func (f *fakeMemory) Facts(context.Context, *memory.Revisions, string, string, time.Time, bool) ([]memory.Fact, error) {
	return f.facts, nil
}

// convGen writes random conversations with tool-call units.
type convGen struct {
	r    *rand.Rand
	call int
}

func (g *convGen) text() string {
	words := []string{"save", "R$ 5.000", "June", "budget", "the", "a", "train", "Lisbon", "2026-03-01", "ok", "é", "ção", "42"}
	n := g.r.IntN(40)
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(words[g.r.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.String()
}

func (g *convGen) msg(role, content string) memory.Message {
	raw, _ := json.Marshal(map[string]string{"role": role, "content": content})
	m, _ := memory.ParseMessage(raw)
	return m
}

// toolUnit is an assistant message calling 1–3 tools and their results.
func (g *convGen) toolUnit() []memory.Message {
	n := 1 + g.r.IntN(3)
	calls := make([]memory.ToolCall, n)
	var out []memory.Message
	for i := range calls {
		g.call++
		calls[i].ID = fmt.Sprintf("call_%d", g.call)
		calls[i].Type = "function"
		calls[i].Function.Name = "lookup"
		calls[i].Function.Arguments = `{"q":"` + strings.TrimSpace(g.text()) + `"}`
	}
	raw, _ := json.Marshal(map[string]any{"role": "assistant", "content": nil, "tool_calls": calls})
	a, _ := memory.ParseMessage(raw)
	out = append(out, a)
	for _, c := range calls {
		raw, _ := json.Marshal(map[string]string{"role": "tool", "tool_call_id": c.ID, "content": g.text()})
		t, _ := memory.ParseMessage(raw)
		out = append(out, t)
	}
	return out
}

// turns returns n exchanges: a user message, then a tool unit sometimes,
// then an assistant reply.
func (g *convGen) turns(n int) []memory.Message {
	var out []memory.Message
	for i := 0; i < n; i++ {
		out = append(out, g.msg("user", g.text()))
		if g.r.IntN(3) == 0 {
			out = append(out, g.toolUnit()...)
		}
		out = append(out, g.msg("assistant", g.text()))
	}
	return out
}

// TestPrepareProperties: for random conversations (tool-call units
// included), both client styles, random memory and random budgets, the
// assembled list never exceeds the budget unless only the untouchable parts
// remain, always keeps the system messages first and the newest user
// message, never orphans a tool message, and keeps the message order.
func TestPrepareProperties(t *testing.T) {
	counter := mustCounter(t)
	r := rand.New(rand.NewPCG(4, 2))
	g := &convGen{r: r}
	for iter := 0; iter < 800; iter++ {
		mem := &fakeMemory{}
		history := g.turns(r.IntN(12))
		for i := range history {
			history[i].Seq = int64(i + 1)
			history[i].Key = fmt.Sprintf("k%d", i+1)
		}
		if len(history) > 0 && r.IntN(2) == 0 {
			to := int64(r.IntN(len(history)))
			mem.summary = &memory.Summary{Version: 1, FromSeq: 1, ToSeq: to, Text: g.text() + "\n" + g.text(), CoveredTokens: 50}
		}
		for i := r.IntN(4); i > 0; i-- {
			mem.facts = append(mem.facts, memory.Fact{Type: memory.FactGoal, Value: g.text(), Pinned: true})
		}
		var system []memory.Message
		for i := r.IntN(3); i > 0; i-- {
			system = append(system, g.msg([]string{"system", "developer"}[r.IntN(2)], g.text()))
		}
		fullHistory := r.IntN(2) == 0
		var client []memory.Message
		if fullHistory {
			client = append(client, history...)
		} else {
			mem.stored = history
		}
		client = append(client, g.msg("user", g.text()))
		if r.IntN(4) == 0 { // the current turn answers tool calls
			client = append(client, g.toolUnit()...)
		}
		// System messages go anywhere in the client's list.
		for _, s := range system {
			i := r.IntN(len(client) + 1)
			client = append(client[:i], append([]memory.Message{s}, client[i:]...)...)
		}
		req := memory.Request{Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c"}, Mode: memory.ModeOn, Model: "gpt-4o-mini"}
		for _, m := range client {
			req.Messages = append(req.Messages, m)
		}
		req.Budget = 1 + r.IntN(900)
		a, err := NewAssembler(Deps{History: mem, Summaries: mem, Facts: mem, Counter: counter}, Options{
			RecentMessages: 1 + r.IntN(40), MaxContextTokens: 8000, CompletionReserve: 1024,
			Shares: Shares{Summary: 0.3, Pinned: 0.1, Facts: 0.15, Recall: 0.2}, FactsMax: 5,
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		p, err := a.Prepare(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		fail := func(format string, args ...any) {
			t.Helper()
			var b strings.Builder
			for _, m := range p.Messages {
				b.WriteString(string(m) + "\n")
			}
			t.Fatalf("iter %d (full history %v, budget %d): %s\n%s", iter, fullHistory, p.Budget, fmt.Sprintf(format, args...), b.String())
		}
		if got := counter.Messages(req.Model, p.Messages); got != p.TokensSent {
			fail("TokensSent %d, the messages cost %d", p.TokensSent, got)
		}
		if p.Budget != min(req.Budget, 8000) {
			fail("budget %d", p.Budget)
		}
		// The untouchable parts: system messages and, from the newest user
		// message on, the current turn.
		lastUser := -1
		for i, m := range client {
			if m.Role == "user" {
				lastUser = i
			}
		}
		var untouchable []json.RawMessage
		for i, m := range client {
			if memory.IsSystem(m.Role) || i >= lastUser {
				untouchable = append(untouchable, m.Raw)
			}
		}
		floor := counter.Messages(req.Model, untouchable)
		if p.OverBudget != (floor > p.Budget) {
			fail("OverBudget %v with untouchable parts costing %d", p.OverBudget, floor)
		}
		if !p.OverBudget && p.TokensSent > p.Budget {
			fail("%d tokens over the budget %d", p.TokensSent, p.Budget)
		}
		out := make([]memory.Message, len(p.Messages))
		for i, raw := range p.Messages {
			if out[i], err = memory.ParseMessage(raw); err != nil {
				fail("message %d: %v", i, err)
			}
		}
		// System messages first, untouched and in the client's order; then
		// at most one memory block.
		system = system[:0]
		for _, m := range client {
			if memory.IsSystem(m.Role) {
				system = append(system, m)
			}
		}
		for i, s := range system {
			if i >= len(out) || string(p.Messages[i]) != string(s.Raw) {
				fail("system message %d not first", i)
			}
		}
		rest := out[len(system):]
		if len(rest) > 0 && rest[0].Role == "system" {
			if !strings.HasPrefix(rest[0].Content, "<memory>") {
				fail("unexpected system message %q", rest[0].Content)
			}
			rest = rest[1:]
		}
		// The rest is a subsequence, in order, of history + client turn, and
		// ends with the client's messages from the newest user message on.
		var source []memory.Message
		if !fullHistory {
			source = append(source, history...)
		}
		for _, m := range client {
			if !memory.IsSystem(m.Role) {
				source = append(source, m)
			}
		}
		j := 0
		for _, m := range rest {
			for j < len(source) && string(source[j].Raw) != string(m.Raw) {
				j++
			}
			if j == len(source) {
				fail("message %s out of order or invented", m.Raw)
			}
			j++
		}
		var tail []memory.Message
		for _, m := range client[lastUser:] {
			if !memory.IsSystem(m.Role) {
				tail = append(tail, m)
			}
		}
		if len(rest) < len(tail) {
			fail("current turn dropped")
		}
		for i, m := range tail {
			if string(rest[len(rest)-len(tail)+i].Raw) != string(m.Raw) {
				fail("current turn not last")
			}
		}
		checkToolPairs(t, rest, fail)
	}
}

// checkToolPairs fails unless every tool message answers a call of the
// assistant message leading its run and every call is answered.
func checkToolPairs(t *testing.T, msgs []memory.Message, fail func(string, ...any)) {
	t.Helper()
	for i := 0; i < len(msgs); i++ {
		calls, _ := toolInfo(msgs[i])
		if msgs[i].Role == "tool" {
			fail("tool message %d has no assistant call before it", i)
		}
		if len(calls) == 0 {
			continue
		}
		answered := map[string]bool{}
		for i+1 < len(msgs) && msgs[i+1].Role == "tool" {
			i++
			_, id := toolInfo(msgs[i])
			answered[id] = true
		}
		for _, c := range calls {
			if !answered[c] {
				fail("call %s unanswered", c)
			}
		}
	}
}
