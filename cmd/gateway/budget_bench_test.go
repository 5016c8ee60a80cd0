package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/engine/enrich"
	"github.com/memgate/memgate/internal/engine/prompt"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
)

// warmConversation is a SQLite store holding one conversation of turns
// exchanges, compacted as it grew by the default configuration (with the
// extractive summariser: deterministic, no model), and the assembler over it.
type warmConversation struct {
	st  *sqlite.Store
	asm *prompt.Assembler
	id  memory.Identity
	// full[i] is what the whole history before turn i+1 costs verbatim.
	full []int
	// sent[i] is what the assembled prompt of turn i+1 cost.
	sent []int
}

// benchTurn is the user's message at turn i: a few sentences, some with
// specifics, like a real chat.
func benchTurn(i int) string {
	if i == 3 {
		return "I want to save R$ 5.000 by June. " + goal
	}
	return fmt.Sprintf("Turn %d. I looked at my expenses again today and the groceries were about %d euros, "+
		"which feels like a lot for two people. What would you suggest to cut this week?", i, 40+i%60)
}

func benchReply(i int) string {
	return fmt.Sprintf("Here are three ideas for turn %d: plan meals for the week, buy store brands, and cook in batches "+
		"on Sunday so you skip takeaway. That could save around %d euros.", i, 10+i%25)
}

// newWarmConversation drives turns exchanges through the assembler and the
// store, compacting after each one; record keeps the token curve.
func newWarmConversation(tb testing.TB, turns int, record bool) *warmConversation {
	tb.Helper()
	counter, err := sharedCounter()
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(tb.TempDir(), "bench.db"), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	cfg := config.Default()
	asm, err := newAssembler(cfg, withReads(cfg, st, nil), nil, nil, counter, nil)
	if err != nil {
		tb.Fatal(err)
	}
	// newCompactor's settings with the extractive summariser only: same
	// triggers, no network.
	extractive := enrich.NewExtractive(func(s string) int { return counter.Text(cfg.Compaction.Model, s) })
	budget := cfg.Budget(counter.ContextWindow(cfg.Compaction.Model))
	sh := cfg.Memory.Shares
	comp := enrich.New(st, st, nil, extractive, counter, enrich.Options{
		RecentTokens:  int(float64(budget) * (1 - sh.Summary - sh.Facts - sh.Recall)),
		HighWatermark: cfg.Compaction.HighWatermark, LowWatermark: cfg.Compaction.LowWatermark,
		MaxMessages: cfg.Compaction.MaxMessages, KeepMessages: cfg.Compaction.KeepMessages,
		MaxSummaryTokens: min(cfg.Compaction.MaxSummaryTokens, int(sh.Summary*float64(budget))),
		FallbackAfter:    1, MaxFacts: cfg.Recall.FactsMaxStored, Model: cfg.Compaction.Model,
	}, nil)
	w := &warmConversation{st: st, asm: asm, id: memory.Identity{Tenant: "t", User: "u", Conversation: "bench"}}
	full := 0
	sys := json.RawMessage(`{"role":"system","content":"You are a frugal finance coach."}`)
	sysCost := counter.RawMessage("gpt-4o-mini", sys)
	for i := 1; i <= turns; i++ {
		u := mustJSON(tb, map[string]string{"role": "user", "content": benchTurn(i)})
		if record {
			p, err := asm.Prepare(ctx, memory.Request{Identity: w.id, Mode: memory.ModeOn, Model: "gpt-4o-mini", Messages: mustMessages(tb, sys, u)})
			if err != nil {
				tb.Fatal(err)
			}
			w.full = append(w.full, full+sysCost+counter.RawMessage("gpt-4o-mini", u)+3)
			w.sent = append(w.sent, p.TokensSent)
		}
		a := mustJSON(tb, map[string]string{"role": "assistant", "content": benchReply(i)})
		um, _ := memory.ParseMessage(u)
		am, _ := memory.ParseMessage(a)
		ex := memory.Exchange{ID: fmt.Sprintf("x%d", i), Identity: w.id, Model: "gpt-4o-mini",
			Turn: []memory.Message{um}, Reply: am, At: time.Now()}
		res, err := st.SaveExchange(ctx, ex)
		if err != nil {
			tb.Fatal(err)
		}
		if err := comp.AfterSave(ctx, ex, res); err != nil {
			tb.Fatal(err)
		}
		full += counter.RawMessage("gpt-4o-mini", u) + counter.RawMessage("gpt-4o-mini", a)
	}
	return w
}

func mustJSON(tb testing.TB, v any) json.RawMessage {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// BenchmarkTokensCurve reports the prompt tokens sent per request against
// what the full history would cost, at turns 10, 100 and 1000 of a long
// synthetic conversation under the default budget (8000 tokens). It runs
// the conversation once, whatever b.N.
func BenchmarkTokensCurve(b *testing.B) {
	w := newWarmConversation(b, 1000, true)
	for b.Loop() {
	}
	for _, turn := range []int{10, 100, 1000} {
		b.ReportMetric(float64(w.sent[turn-1]), fmt.Sprintf("sent@%d", turn))
		b.ReportMetric(float64(w.full[turn-1]), fmt.Sprintf("full@%d", turn))
	}
}

// BenchmarkPrepare measures assembly on a warm 300-turn conversation
// (summary, pinned facts, recent turns from SQLite) against pass-through
// (memory off: the client's messages counted and returned). The recall-N
// cases add recall with the local embedder (384 dimensions,
// hybrid search, top_k 5) over a user whose memory holds N items: the
// conversation's own 600 turns and N-600 passages from 40 earlier
// conversations.
func BenchmarkPrepare(b *testing.B) {
	w := newWarmConversation(b, 300, false)
	msgs := mustMessages(b,
		json.RawMessage(`{"role":"system","content":"You are a frugal finance coach."}`),
		json.RawMessage(`{"role":"user","content":"Should I cancel my streaming subscriptions?"}`),
	)
	for _, mode := range []memory.Mode{memory.ModeOff, memory.ModeOn} {
		b.Run(string(mode), func(b *testing.B) {
			req := memory.Request{Identity: w.id, Mode: mode, Model: "gpt-4o-mini", Messages: msgs}
			b.ReportAllocs()
			cpu := processCPU(b)
			for b.Loop() {
				if _, err := w.asm.Prepare(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
			cpu.report(b)
		})
	}
	cfg := config.Default()
	// The hashed embedder: the recall-N cases measure assembly and search
	// over N items, and seed up to thousands of passages, which the
	// encoder would take minutes to embed; its own cost is measured by
	// internal/encoder's benchmarks and bench's encoder cell.
	cfg.Recall.Embeddings.Provider = "local"
	rl, err := openRecall(cfg, w.st, nil, kept{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	counter, err := sharedCounter()
	if err != nil {
		b.Fatal(err)
	}
	asm, err := newAssembler(cfg, withReads(cfg, w.st, nil), rl.Recaller, nil, counter, nil)
	if err != nil {
		b.Fatal(err)
	}
	held := 0
	for _, n := range []int{3000, 10000} {
		seedRecallHistory(b, w.st, rl.Embedder, w.id, held, n)
		held = n
		b.Run(fmt.Sprintf("recall-%d", n), func(b *testing.B) {
			req := memory.Request{Identity: w.id, Mode: memory.ModeOn, Model: "gpt-4o-mini", Messages: msgs,
				CrossConversation: true}
			// The first requests load the user's vectors and text index
			// into memory, which on a busy machine can outlast
			// memory.load_timeout (recall is then left out): warm up
			// until recall is back, within a deadline.
			var p memory.Prepared
			for deadline := time.Now().Add(time.Minute); ; {
				var err error
				if p, err = asm.Prepare(context.Background(), req); err != nil {
					b.Fatal(err)
				}
				if p.Parts["recall"] > 0 {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("nothing recalled: parts %v, degraded %v", p.Parts, p.Degraded)
				}
			}
			b.ReportAllocs()
			cpu := processCPU(b)
			for b.Loop() {
				if _, err := asm.Prepare(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
			cpu.report(b)
		})
	}
}

// cpuMark is the process's CPU time (user + system) at a point.
type cpuMark time.Duration

// processCPU returns the process's CPU time so far.
func processCPU(tb testing.TB) cpuMark {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return cpuMark(time.Duration(ru.Utime.Nano() + ru.Stime.Nano()))
}

// report adds the CPU time spent since m per iteration, as cpu-ns/op: on a
// host shared with other work it moves far less than the wall time, since
// time spent waiting for a core is not counted.
func (m cpuMark) report(b *testing.B) {
	b.ReportMetric(float64(processCPU(b)-m)/float64(b.N), "cpu-ns/op")
}

// prepTopics feed the earlier conversations of seedRecallHistory.
var prepTopics = []string{"rent", "groceries", "streaming subscriptions", "gym membership", "train tickets",
	"holiday in Porto", "car insurance", "coffee out", "electricity bill", "phone plan", "birthday gifts",
	"pension account", "emergency fund", "credit card interest", "takeaway dinners", "books", "cinema"}

// seedRecallHistory grows the user's memory items from have to n: first the
// warm conversation's 600 turns (when have is 0), then passages of earlier
// conversations, embedded with emb as the indexer would.
func seedRecallHistory(tb testing.TB, st *sqlite.Store, emb interface {
	Embed(context.Context, []string, time.Time) ([][]float32, error)
	Model() string
	Dims() int
}, id memory.Identity, have, n int) {
	tb.Helper()
	ctx := context.Background()
	var batch []memory.Item
	flush := func() {
		texts := make([]string, len(batch))
		for i, it := range batch {
			texts[i] = it.Text
		}
		vecs, err := emb.Embed(ctx, texts, time.Time{})
		if err != nil {
			tb.Fatal(err)
		}
		for i := range batch {
			batch[i].Embedding, batch[i].Model, batch[i].Dims = vecs[i], emb.Model(), emb.Dims()
		}
		if err := st.AddItems(ctx, batch); err != nil {
			tb.Fatal(err)
		}
		batch = batch[:0]
	}
	at := time.Now().Add(-90 * 24 * time.Hour)
	for i := have; i < n; i++ {
		it := memory.Item{Tenant: id.Tenant, User: id.User, Kind: "message", CreatedAt: at.Add(time.Duration(i) * time.Minute)}
		if i < 600 {
			it.Conversation, it.Ref = id.Conversation, memory.Key(fmt.Sprintf("x%d", i/2+1), i%2)
			if i%2 == 0 {
				it.Text = benchTurn(i/2 + 1)
			} else {
				it.Text = benchReply(i/2 + 1)
			}
		} else {
			topic := prepTopics[i%len(prepTopics)]
			it.Conversation, it.Ref = fmt.Sprintf("old%d", i%40), fmt.Sprintf("old-%d:0", i)
			it.Text = fmt.Sprintf("Note %d: last month I spent about %d euros on %s, and I would like to spend "+
				"less on %s next month without giving up %s.", i, 10+i%90, topic, topic, prepTopics[(i/7)%len(prepTopics)])
		}
		batch = append(batch, it)
		if len(batch) == 500 {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
}

// mustMessages reads raws as a request's messages (memory.ParseMessage).
func mustMessages(tb testing.TB, raws ...json.RawMessage) []memory.Message {
	tb.Helper()
	out := make([]memory.Message, len(raws))
	for i, r := range raws {
		m, err := memory.ParseMessage(r)
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = m
	}
	return out
}
