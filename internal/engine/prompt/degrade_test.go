package prompt

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/memory"
)

// recallFunc is a Recaller.
type recallFunc func(ctx context.Context, q memory.RecallQuery) (memory.Recalled, error)

func (f recallFunc) Recall(ctx context.Context, q memory.RecallQuery) (memory.Recalled, error) {
	return f(ctx, q)
}

// pinnedFacts serves one pinned fact.
type pinnedFacts struct{}

func (pinnedFacts) Facts(context.Context, *memory.Revisions, string, string, time.Time, bool) ([]memory.Fact, error) {
	return []memory.Fact{{Type: memory.FactGoal, Key: "goal", Value: "Save for a trip to Kyoto.", Pinned: true}}, nil
}

// joined returns the prompt's messages as one string.
func joined(p memory.Prepared) string {
	var b strings.Builder
	for _, m := range p.Messages {
		b.Write(m)
		b.WriteByte('\n')
	}
	return b.String()
}

func TestPrepareDropsOnlyTheLatePart(t *testing.T) {
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	tests := []struct {
		name     string
		rec      recallFunc
		degraded []string
		recalled bool
	}{
		{"recall late, honouring its context", func(ctx context.Context, _ memory.RecallQuery) (memory.Recalled, error) {
			<-ctx.Done()
			return memory.Recalled{}, ctx.Err()
		}, []string{memory.DegradedRecall}, false},
		{"recall late, ignoring its context", func(context.Context, memory.RecallQuery) (memory.Recalled, error) {
			<-block
			return memory.Recalled{}, nil
		}, []string{memory.DegradedRecall}, false},
		{"query embedding late: full-text results", func(context.Context, memory.RecallQuery) (memory.Recalled, error) {
			return memory.Recalled{Lexical: true, Items: []memory.Item{{Kind: "message", Ref: "x:1", Conversation: "other", Text: "Kyoto hotels are cheaper in June."}}}, nil
		}, []string{memory.DegradedEmbedding}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &fakeHistory{msgs: msgs(t, u1, a1)}
			a, err := NewAssembler(Deps{History: h, Facts: pinnedFacts{}, Recaller: tc.rec, Counter: byteCounter{}}, Options{
				RecentMessages: 10, Shares: Shares{Summary: 0.3, Pinned: 0.1, Facts: 0.15, Recall: 0.2}, FactsMax: 5,
				LoadTimeout: 30 * time.Millisecond, EmbedTimeout: 30 * time.Millisecond,
			}, nil)
			if err != nil {
				t.Fatal(err)
			}
			p, err := a.Prepare(context.Background(), request(t, memory.ModeOn, uNew))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.Degraded, tc.degraded) {
				t.Fatalf("Degraded = %v, want %v", p.Degraded, tc.degraded)
			}
			got := joined(p)
			for _, want := range []string{"My name is Ana.", "Hi Ana.", "What is my name?", "Save for a trip to Kyoto."} {
				if !strings.Contains(got, want) {
					t.Errorf("prompt lacks %q (recent turns and pinned facts must survive):\n%s", want, got)
				}
			}
			if tc.recalled != strings.Contains(got, "Kyoto hotels") {
				t.Errorf("recalled passage present = %v, want %v", !tc.recalled, tc.recalled)
			}
		})
	}
}

func TestPrepareToolLoopContinuesStoredConversation(t *testing.T) {
	stored := msgs(t, u1, a1, u2, aCall)
	for i := range stored {
		stored[i].Seq = int64(i + 1)
	}
	tests := []struct {
		name string
		req  []string
	}{
		{"user, call and results", []string{u2, aCall, tool1, tool2}},
		{"call and results only", []string{aCall, tool1, tool2}},
		// Anthropic's [tool_result, text] message, read as tool messages
		// and a user message: the results' call comes from the store.
		{"results and a question", []string{tool1, tool2, uNew}},
		{"user, call, results and a question", []string{u2, aCall, tool1, tool2, uNew}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := New(&fakeHistory{msgs: stored}, byteCounter{}, Options{RecentMessages: 10}, nil)
			p, err := a.Prepare(context.Background(), request(t, memory.ModeOn, tc.req...))
			if err != nil {
				t.Fatal(err)
			}
			want := []string{u1, a1, u2, aCall, tool1, tool2}
			if tc.req[len(tc.req)-1] == uNew {
				want = append(want, uNew)
			}
			if len(p.Messages) != len(want) {
				t.Fatalf("messages:\n%s\nwant %d: the stored turns before the tool loop, each once", joined(p), len(want))
			}
			for i, w := range want {
				if !jsonEq(t, p.Messages[i], w) {
					t.Errorf("message %d = %s, want %s", i, p.Messages[i], w)
				}
			}
		})
	}
}

func TestPrepareNeverSendsAFailedReplyOrReasoning(t *testing.T) {
	failed, err := memory.MarkFailed(mustMsg(t, `{"role":"assistant","content":"The answer is"}`), "overloaded")
	if err != nil {
		t.Fatal(err)
	}
	reasoned := mustMsg(t, `{"role":"assistant","content":"Hi Ana.","reasoning_content":"greet her"}`)
	stored := []memory.Message{mustMsg(t, u1), reasoned, mustMsg(t, u2), failed}
	a := New(&fakeHistory{msgs: stored}, byteCounter{}, Options{RecentMessages: 10}, nil)
	p, err := a.Prepare(context.Background(), request(t, memory.ModeOn, uNew))
	if err != nil {
		t.Fatal(err)
	}
	got := joined(p)
	if strings.Contains(got, "The answer is") || strings.Contains(got, memory.FailedField) {
		t.Errorf("a failed reply went upstream:\n%s", got)
	}
	if strings.Contains(got, "reasoning_content") || !strings.Contains(got, "Hi Ana.") {
		t.Errorf("want the reply without its reasoning:\n%s", got)
	}
	if !strings.Contains(got, "Weather in Paris?") {
		t.Errorf("the user's turn before the failed reply is missing:\n%s", got)
	}
}

func jsonEq(t *testing.T, a json.RawMessage, b string) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		t.Fatalf("not JSON: %s / %s", a, b)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// TestRecallIsAskedForTheSharesTokens checks the budget recall is given:
// the summary's, pins', facts' and recall's shares of the prompt budget (what
// packing gives the passages), for the configured shares and budget.
func TestRecallIsAskedForTheSharesTokens(t *testing.T) {
	tests := []struct {
		shares Shares
		budget int
		want   int
	}{
		{Shares{Summary: 0.3, Pinned: 0.1, Facts: 0.15, Recall: 0.2}, 8000, 6000},
		{Shares{Summary: 0.25, Pinned: 0.1, Facts: 0.1, Recall: 0.2}, 4000, 2600},
		{Shares{Summary: 0, Facts: 0, Recall: 1}, 4000, 4000},
		{Shares{Summary: 0.1, Facts: 0.1, Recall: 0.1}, 1000, 300},
	}
	for _, tc := range tests {
		var got int
		rec := recallFunc(func(_ context.Context, q memory.RecallQuery) (memory.Recalled, error) {
			got = q.Budget
			return memory.Recalled{}, nil
		})
		a, err := NewAssembler(Deps{History: &fakeHistory{msgs: msgs(t, u1, a1)}, Recaller: rec, Counter: byteCounter{}}, Options{
			RecentMessages: 10, Shares: tc.shares, FactsMax: 5, LoadTimeout: time.Minute, EmbedTimeout: time.Minute,
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		req := request(t, memory.ModeOn, uNew)
		req.Budget = tc.budget
		if _, err := a.Prepare(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("shares %+v, budget %d: recall asked for %d tokens, want %d", tc.shares, tc.budget, got, tc.want)
		}
	}
}

// revFacts serves pinnedFacts and records the revisions each read was
// handed.
type revFacts struct {
	pinnedFacts
	revs chan *memory.Revisions
}

func (f revFacts) Facts(ctx context.Context, rev *memory.Revisions, tenant, user string, now time.Time, history bool) ([]memory.Fact, error) {
	f.revs <- rev
	return f.pinnedFacts.Facts(ctx, rev, tenant, user, now, history)
}

// countingRevisions counts its lookups and answers Facts = the count.
type countingRevisions struct{ n *atomic.Int64 }

func (c countingRevisions) ItemRevisions(context.Context, string, string) (memory.Revisions, error) {
	return memory.Revisions{Facts: c.n.Add(1)}, nil
}

// The user's revisions are read once per request, before its parts run,
// and every part is handed that one read: the pinned facts' read and
// recall's are current as of the same counters, and each request reads
// its own.
func TestPrepareReadsRevisionsOncePerRequest(t *testing.T) {
	facts := revFacts{revs: make(chan *memory.Revisions, 4)}
	recallRevs := make(chan *memory.Revisions, 4)
	rec := recallFunc(func(ctx context.Context, q memory.RecallQuery) (memory.Recalled, error) {
		recallRevs <- q.Revisions
		return memory.Recalled{}, nil
	})
	var lookups atomic.Int64
	a, err := NewAssembler(Deps{History: &fakeHistory{msgs: msgs(t, u1, a1)}, Facts: facts, Recaller: rec, Counter: byteCounter{},
		Revisions: countingRevisions{&lookups}}, Options{
		RecentMessages: 10, Shares: Shares{Summary: 0.3, Pinned: 0.1, Facts: 0.15, Recall: 0.2}, FactsMax: 5,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := a.Prepare(context.Background(), request(t, memory.ModeOn, uNew)); err != nil {
			t.Fatal(err)
		}
		fr, rr := <-facts.revs, <-recallRevs
		if fr == nil || rr == nil || *fr != *rr || fr.Facts != int64(i+1) {
			t.Fatalf("request %d: facts read as of %v, recall as of %v: want the request's one read (%d)", i, fr, rr, i+1)
		}
	}
	if n := lookups.Load(); n != 2 {
		t.Fatalf("%d revisions lookups for 2 requests, want 2", n)
	}
}

// A question's time words are read against when it was said: recall's
// query is dated by the request's At (X-Memory-Timestamp), or now without it.
func TestRecallDatedBySaidAt(t *testing.T) {
	clock := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	said := time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC)
	for _, tc := range []struct {
		at, want time.Time
	}{{said, said}, {time.Time{}, clock}} {
		var got time.Time
		rec := recallFunc(func(_ context.Context, q memory.RecallQuery) (memory.Recalled, error) {
			got = q.Now
			return memory.Recalled{}, nil
		})
		a, err := NewAssembler(Deps{History: &fakeHistory{msgs: msgs(t, u1, a1)}, Recaller: rec, Counter: byteCounter{}}, Options{
			RecentMessages: 10, FactsMax: 5, LoadTimeout: time.Minute, EmbedTimeout: time.Minute, Now: func() time.Time { return clock },
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		req := request(t, memory.ModeOn, uNew)
		req.At = tc.at
		if _, err := a.Prepare(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if !got.Equal(tc.want) {
			t.Errorf("At %v: recall dated %v, want %v", tc.at, got, tc.want)
		}
	}
}
