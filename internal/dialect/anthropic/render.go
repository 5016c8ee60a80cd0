package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/memgate/memgate/internal/dialect/body"
	"github.com/memgate/memgate/internal/dialect/chat"
	"github.com/memgate/memgate/internal/memory"
)

// Render returns the request body to send upstream for the assembled prompt
// p (inject's Prepared for this request's Messages):
//
//   - Every system message of p that is not the client's own is memory
//     (the memory block) and is appended to system after the app's text: to
//     a string system with a blank line between, to a block system as one
//     more text block (the client's blocks, cache_control included, stay as
//     they were), or as the whole system when the client set none.
//   - The client's messages that p keeps go upstream byte for byte. When
//     inject dropped the oldest ones to fit the budget, whole messages are
//     kept from the first one p still holds a part of.
//   - The stored turns p adds before them become Anthropic messages and are
//     prepended, following Anthropic's rules: roles alternate (consecutive
//     turns of one role are merged), the first message is the user's, every
//     tool_use is answered by a tool_result in the very next message and
//     every tool_result answers a tool_use in the message before. A stored
//     user turn right before the client's user message (one that got no
//     reply: its upstream call failed) opens that message: its blocks
//     first, then the client's, unchanged (tool results ahead of both). A
//     stored turn that cannot meet the rules otherwise is dropped, never
//     one of the client's; no stored user text is.
//
// Every other member of the body is forwarded as the client sent it.
func (r *Request) Render(p memory.Prepared) ([]byte, error) {
	a, err := r.Read(p, r.own, len(r.messages)-1)
	if err != nil {
		return nil, err
	}
	stored := make([]turn, 0, len(a.Stored))
	for _, raw := range a.Stored {
		if role, blocks, ok := fromChat(raw); ok {
			stored = append(stored, turn{role: role, blocks: blocks})
		}
	}
	msgs, merged, err := arrange(stored, r.messages, a.First)
	if err != nil {
		return nil, err
	}

	// What this request recalled rides in the messages (system is one
	// field, the same for every message): a text block opening the user
	// message that asks the current question, so the system prompt and the
	// turns before it stay the previous request's prefix. A block an
	// earlier turn of the client's resent history was sent with
	// (memory.keep_recall_resent) goes back into that turn's user message,
	// as it went then: the history up to the previous request's last
	// message is sent as it was, and a cache breakpoint there is read back.
	if a.Recalled != "" && len(stored) == 0 {
		if a.Recalled, err = placeKept(msgs, len(r.messages)-len(msgs), a.RecalledAt); err != nil {
			return nil, err
		}
	}
	if a.Recalled != "" {
		// In a message a stored turn opens, after the stored turn's
		// blocks: right before the question.
		i, skip := questionAt(msgs), 0
		if i == merged.at {
			skip = merged.blocks
		}
		if msgs[i], err = withTextAt(msgs[i], a.Recalled, skip); err != nil {
			return nil, err
		}
	}
	obj := r.obj.Clone()
	r.thinkingOff = r.Thinking && unsignedCall(msgs, r.messages)
	if r.thinkingOff {
		// Anthropic refuses it with thinking on, and memgate holds no
		// signature to send it back with (a turn stored before
		// signatures were, or from another API): this step goes without
		// thinking, as the API's own advice has it, rather than fail.
		obj.Set("thinking", json.RawMessage(`{"type":"disabled"}`))
	}
	left := maxBreakpoints - r.breakpoints
	if !r.Breakpoints {
		left = 0
	}
	switch {
	case a.Memory != "" && a.User:
		// memory.position: user: the stable memory opens the first
		// (user) message instead of joining the system prompt.
		if msgs[0], err = withTextAt(msgs[0], a.Memory, 0); err != nil {
			return nil, err
		}
		if left > 0 {
			var ok bool
			if msgs[0], ok, err = markFirstBlock(msgs[0]); err != nil {
				return nil, err
			} else if ok {
				left--
			}
		}
	case a.Memory != "" && left > 0:
		sys, err := systemWithBreakpoint(r.system, a.Memory)
		if err != nil {
			return nil, fmt.Errorf("render: system: %w", err)
		}
		obj.Set("system", sys)
		left--
	case a.Memory != "":
		// The memory goes after the app's system text: to a block system
		// as one more text block (the client's blocks stay as they were).
		sys, err := chat.AppendText(r.system, a.Memory, outBlock{Type: "text", Text: a.Memory})
		if err != nil {
			return nil, fmt.Errorf("render: system: %w", err)
		}
		obj.Set("system", sys)
	}
	// The end of the recent turns: the message before the question's.
	if q := questionAt(msgs); left > 0 && q > 0 && a.Memory+a.Recalled != "" {
		if msgs[q-1], _, err = markLastBlock(msgs[q-1]); err != nil {
			return nil, err
		}
	}
	obj.Set("messages", body.Array(msgs))
	return obj.Bytes(), nil
}

// ThinkingDisabled reports whether the body the last Render returned turns
// the client's extended thinking off (a stored call memgate holds no
// signed reasoning for): a change of the client's own request, which the
// gateway tells the client of.
func (r *Request) ThinkingDisabled() bool { return r.thinkingOff }

// unsignedCall reports whether the last assistant message of msgs, the
// messages to send, is a stored turn (none of client, the client's own
// messages) that holds tool_use blocks and does not start with a thinking
// or redacted_thinking block: the turn a tool loop continues, which
// Anthropic requires to start with its signed reasoning when thinking is on.
func unsignedCall(msgs, client []json.RawMessage) bool {
	for _, raw := range slices.Backward(msgs) {
		role, blocks, _, err := decodeMessage(raw)
		if err != nil || role != "assistant" {
			continue
		}
		if !slices.ContainsFunc(blocks, func(b block) bool { return b.Type == "tool_use" }) ||
			blocks[0].Type == "thinking" || blocks[0].Type == "redacted_thinking" {
			return false
		}
		return !slices.ContainsFunc(client, func(c json.RawMessage) bool { return bytes.Equal(c, raw) })
	}
	return false
}

// placeKept puts each recalled block that precedes a user message of msgs
// before the question's (questionAt) at the start of that message (after
// its tool results), and returns the text of the others joined, for the
// question. msgs are the client's messages from shift on.
func placeKept(msgs []json.RawMessage, shift int, blocks []chat.Placed) (string, error) {
	q := questionAt(msgs)
	var rest []string
	for _, b := range slices.Backward(blocks) {
		i := b.Before - shift
		if b.Before < 0 || i < 0 || i >= q {
			rest = append(rest, b.Text)
			continue
		}
		if role, _, _, err := decodeMessage(msgs[i]); err != nil || role != "user" {
			rest = append(rest, b.Text)
			continue
		}
		var err error
		if msgs[i], err = withTextAt(msgs[i], b.Text, 0); err != nil {
			return "", err
		}
	}
	slices.Reverse(rest)
	return strings.Join(rest, "\n\n"), nil
}

// questionAt returns the index of the message that asks the current
// question: the last user message with content other than tool results
// (the text of a tool loop's question, not the results that answer its
// calls), else the last user message, else 0.
func questionAt(msgs []json.RawMessage) int {
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		role, blocks, text, err := decodeMessage(msgs[i])
		if err != nil || role != "user" {
			continue
		}
		if last < 0 {
			last = i
		}
		if text != nil {
			return i
		}
		for _, b := range blocks {
			if b.Type != "tool_result" {
				return i
			}
		}
	}
	return max(last, 0)
}

// withTextAt returns the user message raw with a text block holding text
// added before its content, after any tool_result blocks (which Anthropic
// wants first) and skip blocks more; every other member stays as it was.
// A string content becomes two text blocks (one when the string is empty:
// Anthropic refuses an empty text block).
func withTextAt(raw json.RawMessage, text string, skip int) (json.RawMessage, error) {
	obj, err := body.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("render: memory: %w", err)
	}
	mem, err := body.Marshal(outBlock{Type: "text", Text: text})
	if err != nil {
		return nil, fmt.Errorf("render: memory: %w", err)
	}
	var content []json.RawMessage
	c := obj.Get("content")
	if len(c) > 0 && c[0] == '"' {
		var s string
		if err := json.Unmarshal(c, &s); err != nil {
			return nil, fmt.Errorf("render: memory: %w", err)
		}
		content = []json.RawMessage{mem}
		if s != "" {
			b, err := body.Marshal(outBlock{Type: "text", Text: s})
			if err != nil {
				return nil, fmt.Errorf("render: memory: %w", err)
			}
			content = append(content, b)
		}
	} else {
		if err := json.Unmarshal(c, &content); err != nil {
			return nil, fmt.Errorf("render: memory: content: %w", err)
		}
		at := 0
		for at < len(content) {
			var b struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(content[at], &b) != nil || b.Type != "tool_result" {
				break
			}
			at++
		}
		content = slices.Insert(content, min(at+skip, len(content)), mem)
	}
	obj.Set("content", body.Array(content))
	return obj.Bytes(), nil
}

// own reports whether m, a system message, is the client's system prompt.
func (r *Request) own(m json.RawMessage) bool {
	return r.sysChat != nil && bytes.Equal(m, r.sysChat)
}

// turn is one message being arranged: a stored one (blocks) or one of the
// client's (raw, never changed).
type turn struct {
	role   string
	blocks []outBlock
	raw    json.RawMessage
}

// toolUses returns the ids of the turn's tool_use blocks.
func (t turn) toolUses() []string {
	var ids []string
	for _, b := range t.blocks {
		if b.Type == "tool_use" {
			ids = append(ids, b.ID)
		}
	}
	return ids
}

// toolResults returns the ids the turn's tool_result blocks answer.
func (t turn) toolResults() []string {
	var ids []string
	for _, b := range t.blocks {
		if b.Type == "tool_result" {
			ids = append(ids, b.ToolUseID)
		}
	}
	return ids
}

// clientTurn reads one of the client's messages for arranging.
func clientTurn(raw json.RawMessage) turn {
	role, blocks, _, _ := decodeMessage(raw) // parsed once already
	t := turn{role: role, raw: raw}
	for _, b := range blocks {
		if b.Type == "tool_use" || b.Type == "tool_result" {
			t.blocks = append(t.blocks, outBlock{Type: b.Type, ID: b.ID, ToolUseID: b.ToolUseID})
		}
	}
	return t
}

// merge locates a client message a stored user turn opens (see arrange).
type merge struct {
	// at is the message's index among the messages sent; -1: none.
	at int
	// blocks is how many of the stored turn's blocks other than tool
	// results come before the client's own.
	blocks int
}

// arrange returns the messages to send: the stored turns, repaired to meet
// Anthropic's rules, then the client's messages from first on. When the
// client's messages were cut (first > 0), leading ones that cannot open a
// conversation (an assistant message, or tool results whose tool_use was
// cut) are dropped too, keeping at least the last. A stored user turn
// left right before the client's first message, a user's, opens it (see
// opening), and merge says where.
func arrange(stored []turn, client []json.RawMessage, first int) ([]json.RawMessage, merge, error) {
	if first > 0 {
		for first < len(client)-1 {
			t := clientTurn(client[first])
			if t.role == "user" && len(t.toolResults()) == 0 {
				break
			}
			first++
		}
	}
	head := clientTurn(client[first])
	stored = repair(stored, head)
	m := merge{at: -1}
	var opener *turn
	if n := len(stored); n > 0 && stored[n-1].role == head.role {
		opener, stored = &stored[n-1], stored[:n-1]
	}
	out := make([]json.RawMessage, 0, len(stored)+len(client)-first)
	for _, t := range stored {
		b, err := body.Marshal(struct {
			Role    string     `json:"role"`
			Content []outBlock `json:"content"`
		}{t.role, t.blocks})
		if err != nil {
			return nil, m, fmt.Errorf("render: stored turn: %w", err)
		}
		out = append(out, b)
	}
	if opener == nil {
		return append(out, client[first:]...), m, nil
	}
	b, n, err := opening(client[first], *opener)
	if err != nil {
		return nil, m, err
	}
	m = merge{at: len(out), blocks: n}
	out = append(out, b)
	return append(out, client[first+1:]...), m, nil
}

// opening returns the client's user message raw opened by the stored user
// turn t, which got no reply: its content is t's tool results, the
// client's leading tool results, t's other blocks, then the client's other
// blocks (a string content as one text block, none when empty), each of
// the client's byte for byte; every other member stays as it was. It also
// returns how many of t's blocks precede the client's other blocks.
func opening(raw json.RawMessage, t turn) (json.RawMessage, int, error) {
	obj, err := body.Parse(raw)
	if err != nil {
		return nil, 0, fmt.Errorf("render: stored turn: %w", err)
	}
	var own []json.RawMessage
	c := obj.Get("content")
	if len(c) > 0 && c[0] == '"' {
		var s string
		if err := json.Unmarshal(c, &s); err != nil {
			return nil, 0, fmt.Errorf("render: stored turn: %w", err)
		}
		if s != "" {
			b, err := body.Marshal(outBlock{Type: "text", Text: s})
			if err != nil {
				return nil, 0, fmt.Errorf("render: stored turn: %w", err)
			}
			own = []json.RawMessage{b}
		}
	} else if err := json.Unmarshal(c, &own); err != nil {
		return nil, 0, fmt.Errorf("render: stored turn: content: %w", err)
	}
	lead := 0
	for lead < len(own) {
		var b struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(own[lead], &b) != nil || b.Type != "tool_result" {
			break
		}
		lead++
	}
	var results, others []json.RawMessage
	for _, bl := range t.blocks {
		b, err := body.Marshal(bl)
		if err != nil {
			return nil, 0, fmt.Errorf("render: stored turn: %w", err)
		}
		if bl.Type == "tool_result" {
			results = append(results, b)
		} else {
			others = append(others, b)
		}
	}
	content := make([]json.RawMessage, 0, len(t.blocks)+len(own))
	content = append(append(append(append(content, results...), own[:lead]...), others...), own[lead:]...)
	obj.Set("content", body.Array(content))
	return obj.Bytes(), len(others), nil
}

// repair makes the stored turns a valid opening for head, the client's first
// kept message, dropping blocks and turns until nothing changes. A last
// user turn before a user head is kept: it will open head (arrange), so
// the tool calls before it are answered by its results and head's.
func repair(ts []turn, head turn) []turn {
	for {
		before := fingerprint(ts)
		ts = mergeRoles(ts)
		// The first message is a user's.
		for len(ts) > 0 && ts[0].role != "user" {
			ts = ts[1:]
		}
		opens := len(ts) > 0 && ts[len(ts)-1].role == "user" && head.role == "user"
		for i := range ts {
			var prevUses, nextResults []string
			if i > 0 {
				prevUses = ts[i-1].toolUses()
			}
			if i+1 < len(ts) {
				nextResults = ts[i+1].toolResults()
				if opens && i+2 == len(ts) {
					nextResults = append(nextResults, head.toolResults()...)
				}
			} else {
				nextResults = head.toolResults()
			}
			ts[i].blocks = slices.DeleteFunc(slices.Clone(ts[i].blocks), func(b outBlock) bool {
				switch b.Type {
				case "tool_result":
					return !slices.Contains(prevUses, b.ToolUseID)
				case "tool_use":
					return !slices.Contains(nextResults, b.ID)
				}
				return false
			})
		}
		ts = slices.DeleteFunc(ts, func(t turn) bool { return len(t.blocks) == 0 })
		// The client's first message follows a turn of the other role, or
		// a user turn that opens it.
		if n := len(ts); n > 0 && ts[n-1].role == head.role && head.role != "user" {
			ts = ts[:n-1]
		}
		if fingerprint(ts) == before {
			return ts
		}
	}
}

// mergeRoles merges consecutive turns of one role, tool_result blocks first
// in a merged user turn (Anthropic wants them before any other content).
func mergeRoles(ts []turn) []turn {
	out := ts[:0:0]
	for _, t := range ts {
		if n := len(out); n > 0 && out[n-1].role == t.role {
			merged := append(slices.Clone(out[n-1].blocks), t.blocks...)
			if t.role == "user" {
				slices.SortStableFunc(merged, func(a, b outBlock) int {
					return boolInt(b.Type == "tool_result") - boolInt(a.Type == "tool_result")
				})
			}
			out[n-1].blocks = merged
			continue
		}
		out = append(out, t)
	}
	return out
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fingerprint summarises the turns' shape, to detect a repair pass that
// changed nothing.
func fingerprint(ts []turn) string {
	var b bytes.Buffer
	for _, t := range ts {
		b.WriteString(t.role)
		for _, bl := range t.blocks {
			b.WriteByte(' ')
			b.WriteString(bl.Type)
			b.WriteString(bl.ID)
			b.WriteString(bl.ToolUseID)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
