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
