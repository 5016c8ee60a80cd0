package inject

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/memgate/memgate/internal/memory"
)

// TestAssembleMatchesReference: over random conversations (tool-call
// units, both client styles), summaries long enough to be cut, pinned
// facts and facts restating them, recalled passages (some already in the
// prompt), budgets from tiny to the default, and both the default and a
// custom template, assemble prepares exactly what the reference
// assembly (assemble_ref_test.go) prepares: the same messages, byte for
// byte, and the same accounting.
func TestAssembleMatchesReference(t *testing.T) {
	counter := mustCounter(t)
	r := rand.New(rand.NewPCG(15, 3))
	g := &convGen{r: r}
	day := time.Date(2026, 2, 1, 9, 0, 0, 0, time.UTC)
	text := func() string {
		if r.IntN(2) == 0 {
			return benchText(r)
		}
		return g.text()
	}
	iters := 1500
	if testing.Short() {
		iters = 300
	}
	for iter := range iters {
		history := g.turns(r.IntN(30))
		for i := range history {
			history[i].Seq = int64(i + 1)
			history[i].Key = fmt.Sprintf("k%d", i+1)
		}
		var ld loaded
		ld.now = day
		if len(history) > 0 && r.IntN(3) > 0 {
			var b strings.Builder
			for i := r.IntN(40); i >= 0; i-- {
				b.WriteString(text())
				b.WriteString([]string{"\n", " ", ". ", "\n\n"}[r.IntN(4)])
			}
			ld.summary = &memory.Summary{Version: 1, FromSeq: 1, ToSeq: int64(r.IntN(len(history))), Text: b.String(), CoveredTokens: r.IntN(5000)}
		}
		for i := r.IntN(6); i > 0; i-- {
			f := memory.Fact{Type: memory.FactGoal, Key: fmt.Sprintf("f%d", i), Value: text(), Pinned: r.IntN(2) == 0}
			if len(ld.facts) > 0 && r.IntN(4) == 0 { // restates an earlier one
				f.Value = ld.facts[r.IntN(len(ld.facts))].Value
			}
			ld.facts = append(ld.facts, f)
		}
		for i := r.IntN(90); i > 0; i-- {
			it := memory.Item{Kind: []string{"message", "summary", "fact"}[r.IntN(3)], Conversation: []string{"c", "other", "trip-planning"}[r.IntN(3)],
				Text: text(), CreatedAt: day.Add(-time.Duration(r.IntN(5000)) * time.Hour)}
			if r.IntN(3) == 0 {
				it.SaidAt = it.CreatedAt.Add(time.Duration(r.IntN(100)) * time.Hour)
			}
			if len(history) > 0 && r.IntN(6) == 0 { // already in the prompt
				m := history[r.IntN(len(history))]
				it.Ref, it.Text = m.Key, m.Content
			}
			if r.IntN(10) == 0 {
				it.Text += "\n" + text()
			}
			ld.items = append(ld.items, it)
		}
		fullHistory := r.IntN(3) == 0
		var client []memory.Message
		if fullHistory {
			client = append(client, history...)
		} else {
			ld.stored = history
			if len(history) > 0 && r.IntN(4) == 0 { // a stored system message
				i := r.IntN(len(history))
				s := g.msg("system", text())
				s.Seq = history[i].Seq
				ld.stored = append(history[:i:i], append([]memory.Message{s}, history[i:]...)...)
			}
		}
		client = append(client, g.msg("user", text()))
		if r.IntN(5) == 0 {
			client = append(client, g.toolUnit()...)
		}
		var system []memory.Message
		for i := r.IntN(3); i > 0; i-- {
			system = append(system, g.msg("system", text()))
		}
		req := memory.Request{Identity: memory.Identity{Tenant: "t", User: "u", Conversation: "c"}, Mode: memory.ModeOn, Model: "gpt-4o-mini"}
		if r.IntN(4) == 0 {
			req.Model = "gpt-4"
		}
		if r.IntN(3) > 0 {
			req.Budget = 1 + r.IntN(3000)
		}
		opts := Options{RecentMessages: 50, MaxContextTokens: 8000, CompletionReserve: 1024,
			Shares: Shares{Summary: 0.3, Facts: 0.15, Recall: 0.2}, FactsMax: r.IntN(6), Now: func() time.Time { return day }}
		if r.IntN(2) == 0 {
			opts.Shares = Shares{Summary: r.Float64() / 3, Facts: r.Float64() / 3, Recall: r.Float64() / 3}
		}
		switch r.IntN(8) {
		case 0:
			opts.Template = "{{range .Passages}}* {{.Text}} ({{.Kind}})\n{{end}}{{.Summary}}{{range .Facts}}+ {{.Statement}}\n{{end}}"
		case 1: // never empty
			opts.Template = "Remembered, for this user and this conversation only:\n{{range .Pinned}}! {{.Statement}}\n{{end}}{{range .Passages}}{{.Date}} {{.Conversation}}: {{.Text}}\n{{end}}"
		}
		a, err := NewAssembler(Deps{History: &fakeMemory{}, Counter: counter}, opts, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.assemble(req, system, client, fullHistory, ld)
		if err != nil {
			t.Fatal(err)
		}
		ra := *a
		ra.deps.Counter = &memoCounter{TokenCounter: a.deps.Counter}
		want, err := ra.refAssemble(req, system, client, fullHistory, ld)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("iter %d: assembled\n%+v\nwant\n%+v", iter, got, want)
		}
	}
}

// TestToolCallKeyFolds: no non-ASCII rune folds, as encoding/json folds
// keys (simple case folding, and ToUpper of ToLower), to a character of
// "tool_call", which mayNameToolCall relies on.
func TestToolCallKeyFolds(t *testing.T) {
	for r := rune(utf8.RuneSelf); r <= unicode.MaxRune; r++ {
		folds := []rune{unicode.ToUpper(unicode.ToLower(r)), unicode.ToLower(r), unicode.ToUpper(r)}
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			folds = append(folds, f)
		}
		for _, f := range folds {
			if f < utf8.RuneSelf && strings.ContainsRune("tool_callTOOL_CALL", f) {
				t.Errorf("%U folds to %q", r, f)
			}
		}
	}
}

// TestToolInfoMatchesReference: toolInfo, which decodes only a message
// that may name a tool-call key, answers what decoding every message
// answers (refToolInfo), for keys in any case, spelled with escapes or
// with letters encoding/json folds, in random messages with tool calls.
func TestToolInfoMatchesReference(t *testing.T) {
	raws := []string{
		``, `null`, `{`, `[]`, `{"role":"assistant","content":"hi"}`,
		`{"role":"assistant","tool_calls":[{"id":"a"},{"id":"b"}]}`,
		`{"role":"assistant","Tool_Calls":[{"id":"a"}]}`,
		`{"role":"assistant","TOOL_CALLS":[{"ID":"a"}]}`,
		`{"role":"assistant","tool_callſ":[{"id":"a"}]}`,
		`{"role":"assistant","\u0074ool_calls":[{"id":"a"}]}`,
		`{"role":"assistant","tool\u005fcalls":[{"id":"a"}]}`,
		`{"role":"assistant","tool_calls":[{"id":"a"}],"tool_calls":null}`,
		`{"role":"assistant","tool_calls":"oops"}`,
		`{"role":"assistant","tool_calls":[{"id":"a"}],"content":5}`,
		`{"role":"tool","tool_call_id":"a","content":"x"}`,
		`{"role":"tool","TOOL_CALL_ID":"a"}`,
		`{"role":"tool","tool_call_\u0069d":"a"}`,
		`{"role":"tool","tool_call_id":"a\u00e9"}`,
		`{"role":"tool","tool_call_id":7}`,
		`{"role":"user","content":"what is a tool_call?"}`,
		`{"role":"user","content":"caf\u00e9"}`,
	}
	r := rand.New(rand.NewPCG(9, 9))
	g := &convGen{r: r}
	for _, m := range g.turns(200) {
		raws = append(raws, string(m.Raw))
	}
	for _, raw := range raws {
		m := memory.Message{Raw: []byte(raw)}
		calls, id := toolInfo(m)
		wantCalls, wantID := refToolInfo(m)
		if !reflect.DeepEqual(calls, wantCalls) || id != wantID {
			t.Errorf("toolInfo(%s) = %q, %q; want %q, %q", raw, calls, id, wantCalls, wantID)
		}
	}
}
