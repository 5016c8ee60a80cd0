package prompt

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// hugeAssembler is an Assembler over a summary and a pinned fact, with
// the default budget (8000 tokens) and shares and a real token counter.
func hugeAssembler(tb testing.TB) (*Assembler, TokenCounter) {
	tb.Helper()
	counter := mustCounter(tb)
	day := time.Date(2026, 2, 1, 9, 0, 0, 0, time.UTC)
	mem := &fakeMemory{
		summary: &memory.Summary{Version: 1, FromSeq: 1, ToSeq: 10, Text: "The user likes short answers.", CoveredTokens: 300},
		facts:   []memory.Fact{{Type: memory.FactGoal, Value: "Spend less", Pinned: true, UpdatedAt: day}},
	}
	a, err := NewAssembler(Deps{History: mem, Summaries: mem, Facts: mem, Counter: counter,
		Owned: func(tenant, user string) TokenCounter { return counter.Owned(tenant, user) }}, Options{
		RecentMessages: 50, MaxContextTokens: 8000, CompletionReserve: 1024, LoadTimeout: 2 * time.Second,
		Shares: Shares{Summary: 0.3, Pinned: 0.1, Facts: 0.15, Recall: 0.2}, FactsMax: 20, Now: func() time.Time { return day },
	}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return a, counter
}

// chatOf returns the requests of a full-history client: chat(n, q) is a
// system message, n messages "m0", "m1", … (user and assistant in turn)
// and the question q; n may be up to most. Each message is parsed once.
func chatOf(tb testing.TB, most int) func(n int, q string) memory.Request {
	tb.Helper()
	base := request(tb, memory.ModeOn, `{"role":"system","content":"You are terse."}`)
	msgs := make([]memory.Message, most)
	for i := range msgs {
		msgs[i] = mustMsg(tb, fmt.Sprintf(`{"role":%q,"content":"m%d"}`, []string{"user", "assistant"}[i%2], i))
	}
	return func(n int, q string) memory.Request {
		req := base
		req.Model = "gpt-4o-mini"
		req.Messages = append(append(append(make([]memory.Message, 0, n+2), base.Messages...), msgs[:n]...),
			mustMsg(tb, fmt.Sprintf(`{"role":"user","content":%q}`, q)))
		return req
	}
}

// TestPrepareHugeHistory: a full-history client resending 60,000 messages
// gets, within its budget, its system message, the stable block with the
// summary (its history overflows), its newest turns as recent turns — an
// unbroken run ending with its last message before the question, filling
// a good part of the budget — and its question last; TokensOriginal counts
// every message it sent. As the chat goes on, turn after turn, the recent
// turns' first message stays put (the window moves in steps), as it does
// for a short chat.
func TestPrepareHugeHistory(t *testing.T) {
	const n = 60000
	a, counter := hugeAssembler(t)
	first := func(req memory.Request, checkOriginal bool) string {
		t.Helper()
		p, err := a.Prepare(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if p.OverBudget || p.TokensSent > p.Budget || p.Budget != 8000 {
			t.Fatalf("sent %d tokens of a budget of %d (over budget: %v)", p.TokensSent, p.Budget, p.OverBudget)
		}
		if checkOriginal {
			if want := counter.Messages(req.Model, memory.Raws(req.Messages)); p.TokensOriginal != want {
				t.Fatalf("TokensOriginal %d, want %d (every message counted)", p.TokensOriginal, want)
			}
		}
		if p.Parts["summary"] == 0 {
			t.Fatalf("no summary shown for an overflowing history: parts %v", p.Parts)
		}
		if p.Parts["recent"] < p.Budget/3 {
			t.Fatalf("recent turns cost %d tokens of a budget of %d", p.Parts["recent"], p.Budget)
		}
		msgs := make([]memory.Message, len(p.Messages))
		for i, raw := range p.Messages {
			if msgs[i], err = memory.ParseMessage(raw); err != nil {
				t.Fatal(err)
			}
		}
		last := len(req.Messages) - 1
		if msgs[0].Content != "You are terse." || msgs[len(msgs)-1].Content != req.Messages[last].Content {
			t.Fatalf("the prompt does not start with the system message and end with the question")
		}
		// The recent turns: after the stable block, up to the question
		// (no passages: nothing recalled).
		recent := msgs[2 : len(msgs)-1]
		if len(p.Blocks) != 1 || p.Blocks[0].At != 1 || !p.Blocks[0].Stable || len(recent) == 0 {
			t.Fatalf("blocks %+v, %d recent turns", p.Blocks, len(recent))
		}
		for i, m := range recent {
			if want := req.Messages[last-len(recent)+i]; m.Role != want.Role || m.Content != want.Content {
				t.Fatalf("recent turn %d is %s %q, want the client's newest turns (%s %q)", i, m.Role, m.Content, want.Role, want.Content)
			}
		}
		return recent[0].Content
	}
	chat := chatOf(t, n+40)
	moves := 0
	var prev string
	for turn := range 20 {
		got := first(chat(n+2*turn, fmt.Sprint("question ", turn)), turn == 0)
		if turn > 0 && got != prev {
			moves++
		}
		prev = got
	}
	// Each turn adds about 12 tokens; the window drops 30 % of itself
	// (windowLow) when it moves: more than 20 turns' worth.
	if moves > 1 {
		t.Fatalf("the recent turns' first message moved %d times in 20 turns, want at most once", moves)
	}
}

// TestHistoryAnchor: the anchor is before every turn a budget could hold
// (the turns after it cost more than the budget), at a multiple of
// anchorStride or the start of the tool-call unit there, 0 when all fit;
// it counts only the newest turns, back to the budget; and it stays put
// while the chat grows within a stride.
func TestHistoryAnchor(t *testing.T) {
	msgs := make([]memory.Message, 5000)
	for i := range msgs {
		msgs[i].Role = []string{"user", "assistant", "tool"}[i%3]
	}
	cost := func(memory.Message) int { return 5 }
	for _, tt := range []struct {
		name      string
		n, budget int
		want      int
	}{
		{"all fit", 1000, 5000, 0},
		{"all fit exactly", 1000, 5 * 1000, 0},
		{"one over", 1001, 5 * 1000, 0},
		{"past a stride", 3000, 5 * 1000, 1024},
		{"past two strides, at a tool message", 3500, 5 * 1000, 2048 - 1}, // its unit starts at its call
		{"past three strides", 4500, 5 * 1000, 3072},
	} {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			counted := func(m memory.Message) int { calls++; return cost(m) }
			got := historyAnchor(msgs[:tt.n], counted, tt.budget)
			if got != tt.want {
				t.Fatalf("anchor %d, want %d", got, tt.want)
			}
			if fits := tt.budget / 5; calls > fits+1 {
				t.Fatalf("counted %d messages, want at most the %d a budget holds and one", calls, fits+1)
			}
			if tt.want > 0 && tt.n-tt.want <= tt.budget/5 {
				t.Fatalf("anchor %d leaves %d messages, which the budget holds", got, tt.n-got)
			}
		})
	}
	// Growing by one turn at a time, the anchor moves only when the
	// newest turns a budget holds cross a stride.
	moves := 0
	prev := historyAnchor(msgs[:2000], cost, 5000)
	for n := 2002; n <= len(msgs); n += 2 {
		if got := historyAnchor(msgs[:n], cost, 5000); got != prev {
			moves, prev = moves+1, got
		}
	}
	if want := (len(msgs) - 1000) / anchorStride; moves > want {
		t.Fatalf("the anchor moved %d times over %d messages, want at most %d", moves, len(msgs)-2000, want)
	}
}
