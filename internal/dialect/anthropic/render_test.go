package anthropic

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/dialect/dialecttest"
)

// storedTurns is a stored conversation: a tool round trip, a plain turn.
func storedTurns(t *testing.T) []json.RawMessage {
	return []json.RawMessage{
		dialecttest.JSON(t, map[string]any{"role": "user", "content": "I moved to Porto. Weather?"}),
		dialecttest.JSON(t, map[string]any{"role": "assistant", "content": nil, "reasoning_content": "need a tool",
			"tool_calls": []any{map[string]any{"id": "toolu_a", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city":"Porto"}`}}}}),
		dialecttest.JSON(t, map[string]any{"role": "tool", "tool_call_id": "toolu_a", "content": "18C"}),
		dialecttest.JSON(t, map[string]any{"role": "assistant", "content": "It is 18C in Porto."}),
		dialecttest.JSON(t, map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "Look:"},
			map[string]any{"type": "image_url", "image_url": map[string]any{"url": "data:image/jpeg;base64,/9j/"}}}}),
		dialecttest.JSON(t, map[string]any{"role": "assistant", "content": "Nice view."}),
	}
}

func TestRender(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		block    string
		stored   func(*testing.T) []json.RawMessage
		keepFrom int
	}{
		{"new_only_client_string_system", `{"model":"claude-sonnet-4-5","max_tokens":100,"system":"Be kind.","messages":[{"role":"user","content":"What did I say about my city?"}]}`,
			"Facts about the user:\n- city: Porto", storedTurns, 0},
		{"block_system_keeps_cache_control", `{"model":"claude-sonnet-4-5","max_tokens":100,
			"system":[{"type":"text","text":"Be kind.","cache_control":{"type":"ephemeral"}}],
			"messages":[{"role":"user","content":[{"type":"text","text":"Hi again"}]}]}`, "Facts:\n- likes tea", nil, 0},
		{"no_system", `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":"Hi"}]}`, "Facts:\n- likes tea", nil, 0},
		{"trimmed_history_starts_with_user", `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[
			{"role":"user","content":"one"},{"role":"assistant","content":"two"},{"role":"user","content":"three"},
			{"role":"assistant","content":[{"type":"tool_use","id":"toolu_x","name":"f","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_x","content":"ok"}]},
			{"role":"assistant","content":"four"},{"role":"user","content":"five"}]}`, "Summary: counting", nil, 4},
		{"stored_tool_call_answered_by_client", `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_q","content":"42"}]}]}`, "",
			func(t *testing.T) []json.RawMessage {
				return []json.RawMessage{
					dialecttest.JSON(t, map[string]any{"role": "user", "content": "compute"}),
					dialecttest.JSON(t, map[string]any{"role": "assistant", "content": "Computing.", "tool_calls": []any{
						map[string]any{"id": "toolu_q", "type": "function", "function": map[string]any{"name": "calc", "arguments": `{"x":1}`}},
						map[string]any{"id": "toolu_lost", "type": "function", "function": map[string]any{"name": "calc", "arguments": `{}`}}}}),
				}
			}, 0},
		{"unanswered_user_turn_opens_the_question", `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[
			{"role":"user","content":[{"type":"text","text":"Where does my sister live?","cache_control":{"type":"ephemeral"}}]}]}`, "",
			func(t *testing.T) []json.RawMessage {
				return append(storedTurns(t), dialecttest.JSON(t, map[string]any{"role": "user", "content": "My sister lives in Lisbon."}))
			}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			var stored []json.RawMessage
			if tt.stored != nil {
				stored = tt.stored(t)
			}
			out, err := r.Render(dialecttest.Prepared(r.Conversation, tt.block, stored, tt.keepFrom))
			if err != nil {
				t.Fatal(err)
			}
			if err := checkRules(out); err != nil {
				t.Error(err)
			}
			dialecttest.Golden(t, "render_"+tt.name, out, *update)
		})
	}
}

// TestRenderLeavesOutBlankText: a stored turn's text that is only
// whitespace (models often send "\n\n" before a tool call) is no text
// block: the Messages API refuses a blank one ("text content blocks must
// contain non-whitespace text"), which failed every later request of the
// conversation.
func TestRenderLeavesOutBlankText(t *testing.T) {
	r, err := ParseRequest([]byte(`{"model":"claude-sonnet-4-5","max_tokens":100,"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"Thanks!"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	stored := []json.RawMessage{
		dialecttest.JSON(t, map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "Weather?"}, map[string]any{"type": "text", "text": " \n"}}}),
		dialecttest.JSON(t, map[string]any{"role": "assistant", "content": "\n\n", "refusal": " ", "tool_calls": []any{
			map[string]any{"id": "toolu_a", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{}`}}}}),
		dialecttest.JSON(t, map[string]any{"role": "tool", "tool_call_id": "toolu_a", "content": "18C"}),
		dialecttest.JSON(t, map[string]any{"role": "assistant", "content": "It is 18C."}),
	}
	out, err := r.Render(dialecttest.Prepared(r.Conversation, "", stored, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkRules(out); err != nil {
		t.Errorf("%v:\n%s", err, out)
	}
	if !strings.Contains(string(out), "Weather?") || !strings.Contains(string(out), `"tool_use"`) {
		t.Errorf("the stored turns were not replayed:\n%s", out)
	}
}

// TestRenderBlocks renders the two memory blocks: the stable one joins
// the system prompt (or, in user position, opens the first message), the
// recalled one opens the message that asks the current question — after
// its tool results — and the rendered body keeps Anthropic's rules.
func TestRenderBlocks(t *testing.T) {
	tests := []struct {
		name string
		body string
		user bool
	}{
		{"blocks_string_question", `{"model":"claude-sonnet-4-5","max_tokens":100,"system":"Be kind.","messages":[{"role":"user","content":"What did I say about my city?"}]}`, false},
		{"blocks_user_position", `{"model":"claude-sonnet-4-5","max_tokens":100,"system":"Be kind.","messages":[{"role":"user","content":"What did I say about my city?"}]}`, true},
		{"blocks_tool_loop", `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[
			{"role":"user","content":"one"},{"role":"assistant","content":[{"type":"text","text":"two"},{"type":"tool_use","id":"toolu_p","name":"f","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_p","content":"x"},{"type":"text","text":"three"}]},
			{"role":"assistant","content":[{"type":"tool_use","id":"toolu_x","name":"f","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_x","content":"ok"}]}]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			p := dialecttest.PreparedBlocks(r.Conversation, "<memory>\nFacts:\n- city: Porto\n</memory>", "<memory>\nRecalled: Porto\n</memory>", tt.user, storedTurns(t), 0)
			out, err := r.Render(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkRules(out); err != nil {
				t.Error(err)
			}
			dialecttest.Golden(t, "render_"+tt.name, out, *update)
		})
	}
}

// checkRules reports how a rendered body breaks Anthropic's message rules.
func checkRules(b []byte) error {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(b, &req); err != nil {
		return err
	}
	if len(req.Messages) == 0 || req.Messages[0].Role != "user" {
		return fmt.Errorf("first message is not the user's")
	}
	var prevUses []string
	for i, m := range req.Messages {
		if i > 0 && m.Role == req.Messages[i-1].Role {
			return fmt.Errorf("messages %d and %d are both %s", i-1, i, m.Role)
		}
		var blocks []block
		if len(m.Content) > 0 && m.Content[0] == '[' {
			if err := json.Unmarshal(m.Content, &blocks); err != nil {
				return err
			}
			if len(blocks) == 0 {
				return fmt.Errorf("message %d has no content", i)
			}
		}
		var uses, results []string
		otherSeen := false
		for _, bl := range blocks {
			switch bl.Type {
			case "tool_use":
				uses = append(uses, bl.ID)
			case "tool_result":
				if otherSeen {
					return fmt.Errorf("message %d: tool_result after other content", i)
				}
				results = append(results, bl.ToolUseID)
			case "text":
				if strings.TrimSpace(bl.Text) == "" {
					return fmt.Errorf("message %d: a blank text block", i)
				}
				otherSeen = true
			default:
				otherSeen = true
			}
		}
		for _, id := range results {
			if !slices.Contains(prevUses, id) {
				return fmt.Errorf("message %d: tool_result %s does not answer the message before", i, id)
			}
		}
		if i > 0 {
			for _, id := range prevUses {
				if !slices.Contains(results, id) {
					return fmt.Errorf("message %d: tool_use %s is not answered in the next message", i-1, id)
				}
			}
		}
		prevUses = uses
	}
	if len(prevUses) > 0 {
		return fmt.Errorf("the last message has unanswered tool_use")
	}
	return nil
}

// TestRenderRulesProperty renders random stored histories — random roles,
// tool calls answered, unanswered or answered out of place, runs of one
// role — before random client turns, and checks every result against
// Anthropic's rules and that the client's messages arrive unchanged.
func TestRenderRulesProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 17))
	for iter := range 2000 {
		var stored []json.RawMessage
		var open []string
		for range rng.IntN(9) {
			switch rng.IntN(5) {
			case 0, 1:
				stored = append(stored, dialecttest.JSON(t, map[string]any{"role": "user", "content": fmt.Sprintf("u%d", rng.IntN(100))}))
			case 2:
				m := map[string]any{"role": "assistant", "content": fmt.Sprintf("a%d", rng.IntN(100))}
				if rng.IntN(2) == 0 {
					id := fmt.Sprintf("toolu_%d", rng.IntN(1000))
					open = append(open, id)
					m["tool_calls"] = []any{map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "f", "arguments": "{}"}}}
				}
				stored = append(stored, dialecttest.JSON(t, m))
			case 3:
				id := "toolu_stray"
				if len(open) > 0 && rng.IntN(3) > 0 {
					id = open[rng.IntN(len(open))]
				}
				stored = append(stored, dialecttest.JSON(t, map[string]any{"role": "tool", "tool_call_id": id, "content": "r"}))
			case 4:
				stored = append(stored, dialecttest.JSON(t, map[string]any{"role": "system", "content": "old"}))
			}
		}
		client := `[{"role":"user","content":"now"}]`
		if len(open) > 0 && rng.IntN(2) == 0 {
			client = fmt.Sprintf(`[{"role":"user","content":[{"type":"tool_result","tool_use_id":%q,"content":"x"}]}]`, open[len(open)-1])
		}
		r, err := ParseRequest([]byte(`{"model":"claude-sonnet-4-5","max_tokens":5,"messages":` + client + `}`))
		if err != nil {
			t.Fatal(err)
		}
		out, err := r.Render(dialecttest.Prepared(r.Conversation, "mem", stored, 0))
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if last := got.Messages[len(got.Messages)-1]; !keepsClientBlocks(t, last, r.messages[0]) {
			t.Fatalf("iteration %d: client message changed: %s", iter, last)
		}
		// No stored user text is lost (a user turn with no reply before
		// the client's opens the client's message).
		for _, m := range stored {
			var u struct{ Role, Content string }
			if json.Unmarshal(m, &u) == nil && u.Role == "user" && !strings.Contains(string(out), `"`+u.Content+`"`) {
				t.Fatalf("iteration %d: stored user turn %s lost\nstored %s\nrendered %s", iter, m, stored, out)
			}
		}
		// A client tool_result with no stored tool_use left is the client's
		// own doing; the rules are checked when the client opens plainly.
		if client[len(client)-4] == '"' {
			if err := checkRules(out); err != nil {
				t.Fatalf("iteration %d: %v\nstored %s\nrendered %s", iter, err, stored, out)
			}
		}
	}
}

// keepsClientBlocks reports whether got, the last rendered message, is the
// client's message sent: the same bytes, or a user message whose content
// ends with the client's blocks byte for byte (a string content as one
// text block), after stored blocks that open it.
func keepsClientBlocks(t *testing.T, got, sent json.RawMessage) bool {
	t.Helper()
	if string(got) == string(sent) {
		return true
	}
	var g, s struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(got, &g) != nil || json.Unmarshal(sent, &s) != nil || g.Role != s.Role || g.Role != "user" {
		return false
	}
	var gb, sb []json.RawMessage
	if json.Unmarshal(g.Content, &gb) != nil {
		return false
	}
	if len(s.Content) > 0 && s.Content[0] == '"' {
		var text string
		_ = json.Unmarshal(s.Content, &text)
		sb = []json.RawMessage{dialecttest.JSON(t, outBlock{Type: "text", Text: text})}
	} else if json.Unmarshal(s.Content, &sb) != nil {
		return false
	}
	// The client's leading tool results stay a run among the tool
	// results that open the message; its other blocks end it.
	lead := 0
	for lead < len(sb) && strings.Contains(string(sb[lead]), `"type":"tool_result"`) {
		lead++
	}
	rest := sb[lead:]
	if len(gb) < len(sb) {
		return false
	}
	eq := func(a, b []json.RawMessage) bool {
		return slices.EqualFunc(a, b, func(x, y json.RawMessage) bool { return string(x) == string(y) })
	}
	if !eq(gb[len(gb)-len(rest):], rest) {
		return false
	}
	head := gb[:len(gb)-len(rest)]
	for i := 0; i+lead <= len(head); i++ {
		if eq(head[i:i+lead], sb[:lead]) {
			return true
		}
	}
	return false
}

// TestRenderCacheBreakpoints: with breakpoints on, cache_control marks the
// stable memory block and the last block before the question, within what
// the app's own breakpoints leave of four; off, none is added.
func TestRenderCacheBreakpoints(t *testing.T) {
	appBlocks := func(n int) string {
		var bs []string
		for i := range n {
			bs = append(bs, fmt.Sprintf(`{"type":"text","text":"rule %d","cache_control":{"type":"ephemeral"}}`, i))
		}
		if n == 0 {
			return `"Be kind."`
		}
		return "[" + strings.Join(bs, ",") + "]"
	}
	for _, tt := range []struct {
		name      string
		app       int
		on, user  bool
		wantAdded int
	}{
		{"off", 0, false, false, 0},
		{"on", 0, true, false, 2},
		{"on_user_position", 0, true, true, 2},
		{"app_has_three", 3, true, false, 1},
		{"app_has_four", 4, true, false, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(`{"model":"claude-sonnet-4-5","max_tokens":100,"system":` + appBlocks(tt.app) +
				`,"messages":[{"role":"user","content":"What did I say about my city?"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			r.Breakpoints = tt.on
			out, err := r.Render(dialecttest.PreparedBlocks(r.Conversation, "<memory>\nFacts:\n- city: Porto\n</memory>", "<memory>\nRecalled\n</memory>", tt.user, storedTurns(t), 0))
			if err != nil {
				t.Fatal(err)
			}
			if err := checkRules(out); err != nil {
				t.Error(err)
			}
			if got := strings.Count(string(out), `"cache_control"`) - tt.app; got != tt.wantAdded {
				t.Errorf("added %d breakpoints, want %d:\n%s", got, tt.wantAdded, out)
			}
			if tt.wantAdded == 2 {
				dialecttest.Golden(t, "render_breakpoints_"+tt.name, out, *update)
			}
		})
	}
}
