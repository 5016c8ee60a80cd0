package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/engine/recall"
	"github.com/memgate/memgate/internal/engine/record"
	"github.com/memgate/memgate/internal/memory"
)

// BenchmarkMemoryTurn measures one memory-on turn of a long conversation on
// SQLite, as the gateway runs it at one connection: the prompt assembled
// with recall (local embedder, 384 dimensions) over a user whose memory
// holds the conversation's 300 warm turns and 1,400 passages of earlier
// conversations, the exchange stored, then its enrichment (fact extraction
// answering one fixed fact, which restates it every turn, and recall
// indexing of the turn and of the restated fact). Every turn thus adds
// items and changes one: the searches of the next turn find the user's
// items moved, as they do behind the benchmark's memory-on cells.
func BenchmarkMemoryTurn(b *testing.B) {
	w := newWarmConversation(b, 300, false)
	cfg := config.Default()
	// The hashed embedder: this measures the turn's own path (store,
	// search, assembly, enrichment), which the encoder's ~6 ms a text
	// would drown; bench's encoder cell measures the encoder's turn.
	cfg.Recall.Embeddings.Provider = "local"
	rl, err := openRecall(cfg, w.st, nil, kept{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	seedRecallHistory(b, w.st, rl.Embedder, w.id, 0, 2000)
	counter, err := sharedCounter()
	if err != nil {
		b.Fatal(err)
	}
	cs := withReads(cfg, w.st, nil)
	asm, err := newAssembler(cfg, cs, rl.Recaller, nil, counter, nil)
	if err != nil {
		b.Fatal(err)
	}
	x := recall.NewExtractor(replyChatter(`{"facts":[{"type":"goal","key":"savings goal","value":"save 5000 euros by June","confidence":0.9}]}`),
		cs, recall.ExtractorOptions{Model: "m", MaxPerUser: cfg.Recall.FactsMaxStored}, nil)
	hooks := append([]record.Hook{x}, rl.Hooks...)
	ctx := context.Background()
	sys := json.RawMessage(`{"role":"system","content":"You are a frugal finance coach."}`)
	turn := 301
	step := func() memory.Prepared {
		u := mustJSON(b, map[string]string{"role": "user", "content": benchTurn(turn)})
		msgs := mustMessages(b, sys, u)
		p, err := asm.Prepare(ctx, memory.Request{Identity: w.id, Mode: memory.ModeOn, Model: "gpt-4o-mini",
			Messages: msgs, CrossConversation: true})
		if err != nil {
			b.Fatal(err)
		}
		am, err := memory.ParseMessage(mustJSON(b, map[string]string{"role": "assistant", "content": benchReply(turn)}))
		if err != nil {
			b.Fatal(err)
		}
		ex := memory.Exchange{ID: fmt.Sprintf("x%d", turn), Identity: w.id, Model: "gpt-4o-mini",
			Turn: msgs[1:], Reply: am, At: time.Now()}
		res, err := cs.SaveExchange(ctx, ex)
		if err != nil {
			b.Fatal(err)
		}
		for _, h := range hooks {
			if err := h.AfterSaveBatch(ctx, []memory.Exchange{ex}, []memory.SaveResult{res}); err != nil {
				b.Fatal(err)
			}
		}
		turn++
		return p
	}
	// The first turns load the user's vectors and text index into memory,
	// which on a busy machine can outlast memory.load_timeout (recall is
	// then left out): warm up until recall is back, within a deadline.
	for deadline := time.Now().Add(time.Minute); step().Parts["recall"] == 0; {
		if time.Now().After(deadline) {
			b.Fatal("nothing recalled")
		}
	}
	b.ReportAllocs()
	cpu := processCPU(b)
	recalled := 0
	for b.Loop() {
		if step().Parts["recall"] > 0 {
			recalled++
		}
	}
	cpu.report(b)
	// The share of turns whose prompt holds recalled passages: a build
	// whose recall came late (memory.load_timeout) did less work.
	b.ReportMetric(float64(recalled)/float64(b.N), "recalled/op")
}
