package prompt

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// benchWords are pseudo-words for benchmark texts, drawn like the load
// benchmark's (bench/cmd/bench) user messages.
var benchWords = func() []string {
	const consonants, vowels = "bdfgklmnprstvz", "aeiou"
	var syl []string
	for _, c := range consonants {
		for _, v := range vowels {
			syl = append(syl, string(c)+string(v))
		}
	}
	var words []string
	for _, a := range syl {
		for _, b := range syl {
			words = append(words, a+b)
		}
	}
	return words
}()

// benchText is 8 to 24 Zipf-distributed pseudo-words and a question mark.
func benchText(r *rand.Rand) string {
	z := rand.NewZipf(r, 1.1, 2, uint64(len(benchWords)-1))
	n := 8 + r.IntN(17)
	words := make([]string, n)
	for i := range words {
		words[i] = benchWords[z.Uint64()]
	}
	return strings.Join(words, " ") + "?"
}

// benchReply is the load benchmark's fixed upstream reply.
const benchReply = "Hello! This is a fixed benchmark reply from the fake upstream."

// benchAssembly is one request of a warm long conversation as the load
// benchmark's memory-on cell sees it: the default budget (8000 tokens) and
// shares, nstored recent stored messages after the summary, a summary of
// about 2,400 bytes, a pinned fact and a few others, and nitems recalled
// passages (mostly earlier user turns of the conversation), each of
// itemTexts user turns.
func benchAssembly(tb testing.TB, seed uint64, nstored, nitems, itemTexts int) (*Assembler, memory.Request, []memory.Message, []memory.Message, loaded) {
	tb.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	g := &convGen{r: r}
	day := time.Date(2026, 2, 1, 9, 0, 0, 0, time.UTC)
	var ld loaded
	ld.now = day
	var sum strings.Builder
	for sum.Len() < 2400 {
		sum.WriteString("- The user asked: " + benchText(r) + "\n")
	}
	ld.summary = &memory.Summary{Version: 7, FromSeq: 1, ToSeq: 500, Text: strings.TrimSpace(sum.String()), CoveredTokens: 12000}
	for i := range nstored {
		m := g.msg("user", benchText(r))
		if i%2 == 1 {
			m = g.msg("assistant", benchReply)
		}
		m.Seq = int64(501 + i)
		m.Key = memory.Key(fmt.Sprintf("x%d", 250+i/2), i%2)
		ld.stored = append(ld.stored, m)
	}
	ld.facts = []memory.Fact{
		{Type: memory.FactGoal, Value: "I want to spend less on " + benchText(r), Pinned: true},
		{Type: memory.FactProfile, Key: "city", Value: "Porto"},
		{Type: memory.FactPreference, Value: "Prefers short answers"},
	}
	for i := range nitems {
		it := memory.Item{Kind: "message", Conversation: "bench-0", Ref: memory.Key(fmt.Sprintf("x%d", 1+r.IntN(240)), 0),
			Text: benchText(r), CreatedAt: day.Add(-time.Duration(i) * time.Hour)}
		for range itemTexts - 1 {
			it.Text += " " + benchText(r)
		}
		if i%9 == 4 {
			it.Text = benchReply + " " + benchText(r)
		}
		ld.items = append(ld.items, it)
	}
	counter := mustCounter(tb)
	a, err := NewAssembler(Deps{History: &fakeMemory{}, Counter: counter,
		Owned: func(tenant, user string) TokenCounter { return counter.Owned(tenant, user) }}, Options{
		RecentMessages: nstored, MaxContextTokens: 8000, CompletionReserve: 1024,
		Shares: Shares{Summary: 0.3, Pinned: 0.1, Facts: 0.15, Recall: 0.2}, FactsMax: 20, Now: func() time.Time { return day },
	}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	req := request(tb, memory.ModeOn, `{"role":"system","content":"You are a helpful assistant."}`,
		fmt.Sprintf(`{"role":"user","content":%q}`, benchText(r)))
	req.Model = "gpt-4o-mini"
	var system, rest []memory.Message
	for _, m := range req.Messages {
		if memory.IsSystem(m.Role) {
			system = append(system, m)
		} else {
			rest = append(rest, m)
		}
	}
	return a, req, system, rest, ld
}

// BenchmarkAssemble measures assemble, as Prepare calls it (within the
// request's context, with the counter of its owner), over a warm token
// counter, on benchAssembly's request: 50 recent
// stored messages and 70 recalled passages of one user turn each (all
// shown), or of three (66 shown, as in the load benchmark's memory-on
// cell: the tokens the recent turns leave go to more passages), or 20
// and 7 (as cmd/gateway's BenchmarkPrepare/recall-3000). Each request
// swaps two passages, so that, as in a conversation, the memory block is
// new while its lines are not.
func BenchmarkAssemble(b *testing.B) {
	for _, c := range []struct{ stored, items, texts int }{{50, 70, 1}, {50, 70, 3}, {20, 7, 1}} {
		b.Run(fmt.Sprintf("stored-%d-items-%dx%d", c.stored, c.items, c.texts), func(b *testing.B) {
			a, req, system, rest, ld := benchAssembly(b, 1, c.stored, c.items, c.texts)
			b.ReportAllocs()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cpu0 := processCPU(b)
			i := 0
			for b.Loop() {
				i++
				j, k := i%len(ld.items), (i*31+7)%len(ld.items)
				ld.items[j], ld.items[k] = ld.items[k], ld.items[j]
				if _, err := a.within(ctx, req.Tenant, req.User).assemble(req, system, rest, false, ld); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU returns the process's CPU time so far (user and system): on a
// host shared with other work it moves far less than the wall time.
func processCPU(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchToolHistory is a stored history of n exchanges as a tool-using
// agent leaves them: a user question, on every other exchange an
// assistant message calling 2 or 3 tools with arguments of about 300
// bytes of JSON and the tools' results, then the assistant's reply. Every
// message has the key and sequence number storing it gives.
func benchToolHistory(r *rand.Rand, n int, seq0 int64) []memory.Message {
	var out []memory.Message
	add := func(ex, i int, raw []byte) {
		m, err := memory.ParseMessage(raw)
		if err != nil {
			panic(err)
		}
		m.Seq, m.Key = seq0+int64(len(out)), memory.Key(fmt.Sprintf("t%d", ex), i)
		out = append(out, m)
	}
	for ex := range n {
		q, _ := json.Marshal(map[string]string{"role": "user", "content": benchText(r)})
		add(ex, 0, q)
		if ex%2 == 1 {
			calls := make([]memory.ToolCall, 2+r.IntN(2))
			for k := range calls {
				args := map[string]any{"query": benchText(r), "filters": map[string]any{
					"from": "2026-01-01", "to": "2026-02-01", "tags": []string{"budget", "travel", "home"},
				}, "limit": 20, "note": benchText(r) + " " + benchText(r)}
				a, _ := json.Marshal(args)
				calls[k].ID = fmt.Sprintf("call_%08x", r.Uint32())
				calls[k].Type = "function"
				calls[k].Function.Name = "search_records"
				calls[k].Function.Arguments = string(a)
			}
			raw, _ := json.Marshal(map[string]any{"role": "assistant", "content": nil, "tool_calls": calls})
			add(ex, 1, raw)
			for k, c := range calls {
				res, _ := json.Marshal(map[string]string{"role": "tool", "tool_call_id": c.ID,
					"content": `{"results":[{"title":"` + benchText(r) + `","amount":1250.5}],"total":1}`})
				add(ex, 2+k, res)
			}
		}
		reply, _ := json.Marshal(map[string]string{"role": "assistant", "content": benchReply + " " + benchText(r)})
		add(ex, 9, reply)
	}
	return out
}

// BenchmarkAssembleToolTurns is BenchmarkAssemble's 20x7 cell over a
// history of 20 exchanges of a tool-using agent (benchToolHistory): half
// of them with 2 or 3 tool calls and their results.
func BenchmarkAssembleToolTurns(b *testing.B) {
	a, req, system, rest, ld := benchAssembly(b, 1, 0, 7, 1)
	ld.stored = benchToolHistory(rand.New(rand.NewPCG(2, 2)), 20, ld.summary.ToSeq+1)
	a.opts.RecentMessages = len(ld.stored)
	b.ReportAllocs()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cpu0 := processCPU(b)
	for b.Loop() {
		if _, err := a.within(ctx, req.Tenant, req.User).assemble(req, system, rest, false, ld); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkReplayable measures replayable alone on
// BenchmarkAssembleToolTurns' history, for a request that declares tools
// and for one that declares none (the tool turns left out).
func BenchmarkReplayable(b *testing.B) {
	stored := benchToolHistory(rand.New(rand.NewPCG(2, 2)), 20, 501)
	rest := []memory.Message{mustMsg(b, `{"role":"user","content":"And the total?"}`)}
	for _, noTools := range []bool{false, true} {
		b.Run(map[bool]string{false: "tools", true: "no-tools"}[noTools], func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := processCPU(b)
			for b.Loop() {
				replayable(stored, rest, noTools)
			}
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
