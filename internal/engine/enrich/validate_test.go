package enrich

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/memory"
)

// summaryInput is a conversation worth summarising, English and Portuguese.
func summaryInput() Input {
	return Input{
		Previous: &memory.Summary{Text: "The user lives in Lisbon and works as a nurse."},
		Messages: []memory.Message{
			{Role: "system", Content: "You are a helpful assistant. Always answer briefly."},
			{Role: "user", Content: "I want to save R$ 5.000 by June for the trip to Chile."},
			{Role: "assistant", Content: "That is about R$ 830 a month. Do you want a plan?"},
			{Role: "user", Content: "Yes please. Also my sister Marta is visiting on 12 March."},
			{Role: "user", Content: "Decidi cancelar a academia, está caro demais."},
		},
		MaxTokens: 60,
	}
}

func TestCheckSummary(t *testing.T) {
	tests := []struct {
		name    string
		summary string
		in      func(Input) Input
		reject  string // "" accepts; else a fragment of the reason
	}{
		// Accepted.
		{name: "third-person paraphrase", summary: "The user, a nurse in Lisbon, plans to save R$ 5.000 by June for a Chile trip; her sister Marta visits on 12 March. She cancelled the gym."},
		{name: "terse key points", summary: "Saving R$ 5.000 by June (Chile). Sister Marta visiting 12 March. Gym cancelled (academia)."},
		{name: "portuguese summary", summary: "O usuário mora em Lisboa, quer juntar R$ 5.000 até junho para o Chile e decidiu cancelar a academia; a irmã Marta chega em 12 de março."},
		{name: "previous summary carried over", summary: "The user lives in Lisbon and works as a nurse. Saving 5.000 for Chile."},
		{name: "small talk source accepts anything grounded-free", summary: "Greetings exchanged.",
			in: func(in Input) Input {
				return Input{Messages: []memory.Message{{Role: "user", Content: "ok"}, {Role: "assistant", Content: "Hi!"}}, MaxTokens: 60}
			}},

		// Echoes of the instructions and the prompt template.
		{name: "system prompt echoed", reject: "instructions",
			summary: "You maintain the rolling summary of a conversation between a user and an assistant. Fold the previous summary and the new messages into one updated summary written in the third person."},
		{name: "instructions paraphrased around a copy", reject: "instructions",
			summary: "Summary: keep every specific the user may need later verbatim: amounts and numbers, dates, names, places, goals. Drop small talk."},
		{name: "template copied with the conversation", reject: "template",
			summary: "Previous summary:\nThe user lives in Lisbon.\n\nNew messages:\nuser: I want to save R$ 5.000 by June.\nKeep the summary under 60 tokens."},
		{name: "json schema echoed", reject: "template",
			summary: `{"summary": string, "key_events": [string], "preserved": {"numbers": [string]}}`},
		{name: "schema placeholder as the summary", reject: "content words", summary: "string"},
		{name: "retry instruction echoed", reject: "template", summary: "That reply was invalid. Reply again with the JSON object only."},

		// Replies about the task, not the conversation.
		{name: "refusal", reject: "content words", summary: "I'm sorry, but I can't help with that request."},
		{name: "meta reply", reject: "content words", summary: "Here is the updated summary in JSON format as requested."},
		{name: "generic", reject: "content words", summary: "The conversation covered various topics and the assistant provided helpful information."},
		{name: "hallucinated other conversation", reject: "content words", summary: "The user asked about Kubernetes deployments, Helm charts and ingress controllers for their cluster."},
		{name: "empty", reject: "empty", summary: "   "},

		// Length.
		{name: "over-long", reject: "tokens", summary: strings.Repeat("Saving R$ 5.000 by June for Chile. ", 20)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := summaryInput()
			if tt.in != nil {
				in = tt.in(in)
			}
			err := CheckSummary(in, Output{Summary: tt.summary}, words)
			if tt.reject == "" {
				if err != nil {
					t.Fatalf("rejected a good summary: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrSummaryRejected) || !errors.Is(err, ErrBadReply) {
				t.Fatalf("err = %v, want ErrSummaryRejected (and ErrBadReply)", err)
			}
			if !strings.Contains(err.Error(), tt.reject) {
				t.Fatalf("reason %q lacks %q", err, tt.reject)
			}
		})
	}
}

// A model that echoes its instructions gets one retry, then the compactor
// stores the extractive summary instead at once, and counts the rejection.
func TestCompactRejectsEchoedSummary(t *testing.T) {
	echo := `{"summary":"You maintain the rolling summary of a conversation between a user and an assistant. Fold the previous summary and the new messages into one updated summary.","key_events":[],"preserved":{"numbers":[],"dates":[],"decisions":[]}}`
	chat := &scriptedChatter{replies: []string{echo, echo}}
	st := &memStore{}
	for i := 0; i < 8; i++ {
		st.add([]string{"user", "assistant"}[i%2], "I want to save R$ 5.000 by June for the trip.")
	}
	st.add("user", "My sister Marta is visiting on 12 March.")
	c := New(st, st, NewLLM(chat, "m", words), NewExtractive(words), wordCounter{}, Options{
		RecentTokens: 100, HighWatermark: 0.9, LowWatermark: 0.4,
		MaxMessages: 6, KeepMessages: 3, MaxSummaryTokens: 50, FallbackAfter: 3, MaxFacts: 10,
	}, nil)
	if err := c.Compact(context.Background(), testID, "m"); err != nil {
		t.Fatalf("compact: %v", err)
	}
	if len(chat.reqs) != 2 {
		t.Fatalf("summariser calls = %d, want 2 (one retry)", len(chat.reqs))
	}
	if len(st.summaries) != 1 {
		t.Fatalf("summaries = %d, want 1", len(st.summaries))
	}
	got := st.summaries[0].Text
	if strings.Contains(got, "rolling summary") || !strings.Contains(got, "5.000") {
		t.Fatalf("stored summary = %q, want the extractive one", got)
	}
	if n := metricSum(t, c, "memgate_compaction_summaries_rejected_total"); n != 1 {
		t.Fatalf("rejections = %v, want 1", n)
	}
	if n := metricSum(t, c, "memgate_compaction_summaries_total"); n != 1 {
		t.Fatalf("summaries = %v, want 1", n)
	}
}

// Without a fallback a rejected summary is an error and nothing is stored.
func TestCompactRejectedWithoutFallback(t *testing.T) {
	st := &memStore{}
	for i := 0; i < 8; i++ {
		st.add("user", "We adopted a puppy and named him Biscuit.")
	}
	c := newTestCompactor(st, summarizerFunc(func(context.Context, Input) (Output, error) {
		return Output{Summary: "Here is the summary you asked for, in the requested format."}, nil
	}), nil)
	err := c.Compact(context.Background(), testID, "m")
	if !errors.Is(err, ErrSummaryRejected) {
		t.Fatalf("err = %v, want ErrSummaryRejected", err)
	}
	if len(st.summaries) != 0 {
		t.Fatalf("stored %+v", st.summaries)
	}
}

type summarizerFunc func(context.Context, Input) (Output, error)

func (f summarizerFunc) Summarize(ctx context.Context, in Input) (Output, error) { return f(ctx, in) }

// metricSum returns the sum of the counter samples named name among c's
// collectors.
func metricSum(tb testing.TB, c *Compactor, name string) float64 {
	tb.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c.Collectors()...)
	fams, err := reg.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	var sum float64
	for _, f := range fams {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
