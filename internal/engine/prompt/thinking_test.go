package prompt

import (
	"context"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// TestReplayedReasoningOnlyWhereTakenBack: a stored reply's reasoning
// never goes upstream as history, except its signed blocks
// (thinking_blocks) to a request whose API takes them back
// (ReplaysThinking: Anthropic with thinking on, which requires them with
// a tool loop's call).
func TestReplayedReasoningOnlyWhereTakenBack(t *testing.T) {
	reply := mustMsg(t, `{"role":"assistant","content":null,"tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"weather","arguments":"{}"}}],`+
		`"reasoning_content":"check it","thinking_blocks":[{"type":"thinking","thinking":"check it","signature":"sig"}]}`)
	stored := []memory.Message{mustMsg(t, u2), reply}
	const result = `{"role":"tool","tool_call_id":"toolu_1","content":"18C"}`
	for _, replays := range []bool{false, true} {
		a := New(&fakeHistory{msgs: stored}, byteCounter{}, Options{RecentMessages: 10}, nil)
		req := request(t, memory.ModeOn, result)
		req.ReplaysThinking = replays
		p, err := a.Prepare(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		got := joined(p)
		if strings.Contains(got, "reasoning_content") || strings.Contains(got, `"signature":"sig"`) != replays || !strings.Contains(got, "toolu_1") {
			t.Errorf("ReplaysThinking %v: the replayed call\n%s\nwant it without reasoning_content, with its signed blocks: %v", replays, got, replays)
		}
	}
}

// TestRecentTurnsShowTheAnswerWithoutItsReasoning: a stored reply that
// opens with a reasoning model's <think> block (as an OpenAI-compatible
// server relays DeepSeek-R1's or QwQ's) goes back upstream as history
// with its answer alone, as a chat app resends it: in a string content
// or a first text part, with tools declared or not. A reply that is only
// a block says nothing: it goes as an empty reply with tools declared, and
// is left out without, as any empty reply is. Replies without a leading block go as they were
// stored, byte for byte.
func TestRecentTurnsShowTheAnswerWithoutItsReasoning(t *testing.T) {
	const (
		q    = `{"role":"user","content":"Capital of France?"}`
		next = `{"role":"user","content":"And of Spain, please tell me?"}`
	)
	for _, tc := range []struct {
		name    string
		reply   string
		noTools bool
		want    []string // in the prompt
		wantNot []string
	}{
		{"string", `{"role":"assistant","content":"<think>long reasoning about geography</think>\n\nParis."}`, true,
			[]string{`"content":"Paris."`}, []string{"long reasoning", "think>"}},
		{"string with tools", `{"role":"assistant","content":"\n<think>long reasoning about geography</think>\n\nParis.\n"}`, false,
			[]string{`"content":"Paris."`}, []string{"long reasoning", "think>"}},
		{"first text part", `{"role":"assistant","content":[{"type":"text","text":"<think>long reasoning about geography</think>\n\nParis."},{"type":"text","text":"Madrid next."}]}`, true,
			[]string{`"text":"Paris."`, "Madrid next."}, []string{"long reasoning", "think>"}},
		{"only a block, tools declared", `{"role":"assistant","content":"<think>long reasoning about geography</think>"}`, false,
			[]string{`{"content":"","role":"assistant"}`, "Capital of France?"}, []string{"long reasoning", "think>"}},
		{"only a block, no tools", `{"role":"assistant","content":"<think>long reasoning about geography</think>"}`, true,
			[]string{"Capital of France?", "And of Spain"}, []string{"long reasoning", "think>", `"assistant"`}},
		{"block not leading", `{"role":"assistant","content":"Paris. <think>long reasoning about geography</think>"}`, true,
			[]string{`{"role":"assistant","content":"Paris. <think>long reasoning about geography</think>"}`}, nil},
		{"plain", `{"role":"assistant", "content":"\nParis.\n"}`, true,
			[]string{`{"role":"assistant", "content":"\nParis.\n"}`}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stored := []memory.Message{mustMsg(t, q), mustMsg(t, tc.reply)}
			a := New(&fakeHistory{msgs: stored}, byteCounter{}, Options{RecentMessages: 10}, nil)
			req := request(t, memory.ModeOn, next)
			req.NoTools = tc.noTools
			p, err := a.Prepare(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			got := joined(p)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("prompt\n%s\nwant it to hold %s", got, w)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(got, w) {
					t.Errorf("prompt\n%s\nwant it without %s", got, w)
				}
			}
		})
	}
}

// TestRecallQueryLeavesOutTheReplysReasoning: a short follow-up's recall
// query joins the reply before it without the reasoning block the reply
// opened with, so recall matches what was said, not what the model
// thought.
func TestRecallQueryLeavesOutTheReplysReasoning(t *testing.T) {
	got := recallText([]memory.Message{
		{Role: "user", Content: "Book me a flight."},
		{Role: "assistant", Content: "<think>Maybe the user prefers trains to Porto.</think>\n\nI can book the Lisbon flight for Friday."},
		{Role: "user", Content: "yes please"},
	})
	if want := "I can book the Lisbon flight for Friday.\nyes please"; got != want {
		t.Errorf("recallText = %q, want %q", got, want)
	}
}
