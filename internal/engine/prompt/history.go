package prompt

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/memgate/memgate/internal/memory"
)

// toolFields are the parts of a message that tie tool calls to their results.
type toolFields struct {
	ToolCalls []struct {
		ID string `json:"id"`
	} `json:"tool_calls"`
	ToolCallID string `json:"tool_call_id"`
}

// tools is what toolInfo reads of a message.
type tools struct {
	calls   []string // an assistant message's tool call ids
	answers string   // the call id a tool message answers
}

// toolList is a list of messages with what toolInfo reads of its
// assistant and tool messages (those of other roles are not read: no step
// asks), read once per request rather than by each step that asks.
type toolList struct {
	msgs []memory.Message
	// tools[i] is msgs[i]'s; nil when no message calls or answers a tool.
	tools []tools
}

// readTools returns stored messages with what toolInfo reads of each
// assistant and tool message.
func readTools(msgs []memory.Message) toolList {
	return readToolsOf(msgs, func(int) bool { return true })
}

// readClientTools returns the client's messages with what toolInfo reads
// of each assistant message and of the tool messages that lead them (the
// results answering the stored calls): the steps ask nothing of its later
// tool results, which may be long.
func readClientTools(msgs []memory.Message) toolList {
	lead := 0
	for lead < len(msgs) && msgs[lead].Role == "tool" {
		lead++
	}
	return readToolsOf(msgs, func(i int) bool { return i < lead || msgs[i].Role == "assistant" })
}

// readToolsOf returns msgs with what toolInfo reads of each assistant and
// tool message i that read(i) asks for.
func readToolsOf(msgs []memory.Message, read func(i int) bool) toolList {
	l := toolList{msgs: msgs}
	for i, m := range msgs {
		if m.Role != "assistant" && m.Role != "tool" || !read(i) {
			continue
		}
		if calls, answers := toolInfo(m); calls != nil || answers != "" {
			if l.tools == nil {
				l.tools = make([]tools, len(msgs))
			}
			l.tools[i] = tools{calls: calls, answers: answers}
		}
	}
	return l
}

// at returns what toolInfo reads of message i.
func (l toolList) at(i int) tools {
	if l.tools == nil {
		return tools{}
	}
	return l.tools[i]
}

// from returns the list's messages from i on.
func (l toolList) from(i int) toolList {
	if l.tools == nil {
		return toolList{msgs: l.msgs[i:]}
	}
	return toolList{msgs: l.msgs[i:], tools: l.tools[i:]}
}

// toolInfo reads a message's tool call ids (assistant) or answered call id
// (tool).
func toolInfo(m memory.Message) (calls []string, answers string) {
	if !mayNameToolCall(m.Raw) {
		return nil, "" // what decoding it would answer, at a fraction of the cost
	}
	var f toolFields
	if err := json.Unmarshal(m.Raw, &f); err != nil {
		return nil, ""
	}
	for _, c := range f.ToolCalls {
		calls = append(calls, c.ID)
	}
	return calls, f.ToolCallID
}

// mayNameToolCall reports whether raw may hold a "tool_calls" or
// "tool_call_id" key as encoding/json matches keys to toolFields: raw
// holds "tool_call" in any case, or a \u escape, which could spell it.
// (encoding/json also folds non-ASCII letters, but none folds to one of
// "tool_call": TestToolCallKeyFolds.) Without either, decoding raw finds
// neither key, and toolInfo answers nothing.
func mayNameToolCall(raw []byte) bool { return mayHoldKey(raw, "tool_call") }

// mayHoldKey reports whether raw may hold a key that has name (lower
// case ASCII letters and _, neither k nor s, which encoding/json also
// matches to non-ASCII letters) in it, as encoding/json matches keys:
// raw holds name in any case, or a \u escape, which could spell it.
func mayHoldKey(raw []byte, name string) bool {
	if bytes.Contains(raw, []byte(`\u`)) {
		return true
	}
	first, upper := name[0], name[0]-('a'-'A')
	for i := 0; i+len(name) <= len(raw); i++ {
		if (raw[i] == first || raw[i] == upper) && asciiEqualFold(raw[i:i+len(name)], name) {
			return true
		}
	}
	return false
}

// asciiEqualFold reports whether b is s, ASCII letters compared without
// case; s is lower case.
func asciiEqualFold(b []byte, s string) bool {
	for i := range len(s) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// replayable returns the stored messages (stored) that go before the
// client's messages (rest) in the prompt: every tool call with an id
// (withCallIDs), no id a newer call also has (distinctCallIDs), only what
// keeps the tool-call protocol (usableHistory), and, for a request that
// declares no tools (noTools, memory.Request.NoTools), none of that
// protocol (withoutTools). The messages given are never changed. Each
// message's tool calls are read once (readTools, readClientTools), and
// again only when a step rewrites it.
func replayable(stored, rest []memory.Message, noTools bool) []memory.Message {
	next := readClientTools(rest)
	kept := usableHistory(distinctCallIDs(withCallIDs(readTools(stored)), next), next)
	if noTools {
		kept = withoutTools(kept, rest)
	}
	return kept
}

// withoutTools returns the replayable history (kept, usableHistory's own
// slice, reused) without the tool-call protocol, for a request that
// declares no tools: some upstreams (AWS Bedrock, Anthropic at times)
// reject tool calls or results in a request without tools. An assistant
// message loses its tool calls (and legacy function_call) and is kept with
// its text, or dropped when it has none, as is an assistant message
// without calls or text (an empty reply); tool and function results are
// dropped. Two messages of one role that a drop leaves side by side (the
// text before a call and the answer after its results; a question whose
// tool loop got no answer and the next question) become one (oneMessage):
// strict upstreams refuse two user or two assistant messages in a row,
// and no user text is lost. One exception keeps the protocol whole: when
// the client's own messages (rest) open with tool results, the last kept
// assistant message with calls and the results after it stay as they are,
// since they are what the client answers (its own messages are never
// altered).
func withoutTools(kept, rest []memory.Message) []memory.Message {
	end := len(kept) // kept[end:] stays as it is
	if len(rest) > 0 && rest[0].Role == "tool" {
		i := len(kept)
		for i > 0 && kept[i-1].Role == "tool" {
			i--
		}
		if i > 0 && kept[i-1].HasToolCalls() {
			end = i - 1
		}
	}
	out := kept[:0]
	dropped := false // a message was left out after out's last
	for _, m := range kept[:end] {
		switch {
		case m.Role == "tool" || m.Role == "function":
			dropped = true
			continue
		case (mayNameToolCall(m.Raw) || mayHoldKey(m.Raw, "function_call")) && m.HasToolCalls():
			var ok bool
			if m, ok = withoutCalls(m); !ok {
				dropped = true
				continue
			}
		case m.Role == "assistant" && strings.TrimSpace(m.Content) == "":
			dropped = true
			continue
		}
		if n := len(out); dropped && n > 0 && out[n-1].Role == m.Role {
			if j, ok := oneMessage(out[n-1], m); ok {
				out[n-1], dropped = j, false
				continue
			}
		}
		out, dropped = append(out, m), false
	}
	return append(out, kept[end:]...)
}

// withoutCalls returns the assistant message m without its tool calls and
// function_call, or false when nothing else of it is worth sending (no
// text, no refusal, no other part) or its JSON cannot be read.
func withoutCalls(m memory.Message) (memory.Message, bool) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(m.Raw, &fields); err != nil {
		return m, false
	}
	delete(fields, "tool_calls")
	delete(fields, "function_call")
	m, err := withFields(m, fields)
	if err != nil || strings.TrimSpace(m.Content) == "" {
		return m, false
	}
	return m, true
}

// oneMessage returns the messages a and b, of one role (user or assistant)
// and one name, as one message: a's content then b's — two texts a blank
// line apart, else the parts of both, a text as a text part — and, for an
// assistant, a's refusal then b's; every other member is a's, else b's.
// It keeps a's place (Seq, Key). It reports false, and a unchanged, when
// they differ in role or name or either cannot be read: a message named
// for its author is never attributed to another.
func oneMessage(a, b memory.Message) (memory.Message, bool) {
	if a.Role != b.Role || a.Role != "user" && a.Role != "assistant" {
		return a, false
	}
	var fa, fb map[string]json.RawMessage
	if json.Unmarshal(rawOf(a), &fa) != nil || json.Unmarshal(rawOf(b), &fb) != nil ||
		!bytes.Equal(fa["name"], fb["name"]) {
		return a, false
	}
	content, err := joinedContent(fa["content"], fb["content"])
	if err != nil {
		return a, false
	}
	refusal, err := joinedText(fa["refusal"], fb["refusal"])
	if err != nil {
		return a, false
	}
	fields := fb
	for k, v := range fa {
		fields[k] = v
	}
	fields["content"] = content
	delete(fields, "refusal")
	if string(refusal) != `""` {
		fields["refusal"] = refusal
	}
	m, err := withFields(a, fields)
	return m, err == nil
}

// joinedContent returns two chat contents (each a string, null or absent,
// or an array of parts) as one: two texts a blank line apart, else the
// parts of a then b, a non-empty text as one text part.
func joinedContent(a, b json.RawMessage) (json.RawMessage, error) {
	if !isArray(a) && !isArray(b) {
		return joinedText(a, b)
	}
	var parts []json.RawMessage
	for _, c := range []json.RawMessage{a, b} {
		if isArray(c) {
			var ps []json.RawMessage
			if err := json.Unmarshal(c, &ps); err != nil {
				return nil, err
			}
			parts = append(parts, ps...)
			continue
		}
		var s string
		if err := unmarshalText(c, &s); err != nil {
			return nil, err
		}
		if s != "" {
			p, err := json.Marshal(struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}{"text", s})
			if err != nil {
				return nil, err
			}
			parts = append(parts, p)
		}
	}
	return json.Marshal(parts)
}

// joinedText returns two JSON strings (null or absent read as "") as one:
// the non-empty ones a blank line apart.
func joinedText(a, b json.RawMessage) (json.RawMessage, error) {
	var sa, sb string
	if err := unmarshalText(a, &sa); err != nil {
		return nil, err
	}
	if err := unmarshalText(b, &sb); err != nil {
		return nil, err
	}
	switch {
	case sa == "":
		sa = sb
	case sb != "":
		sa += "\n\n" + sb
	}
	return json.Marshal(sa)
}

// unmarshalText reads the JSON string raw into s; null or absent is "".
func unmarshalText(raw json.RawMessage, s *string) error {
	if len(raw) == 0 || string(raw) == "null" {
		*s = ""
		return nil
	}
	return json.Unmarshal(raw, s)
}

// isArray reports whether raw is a JSON array.
func isArray(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '['
}

// withFields returns m with its JSON replaced by fields (and its text and
// token count with it); m keeps its place (Seq, Key).
func withFields(m memory.Message, fields map[string]json.RawMessage) (memory.Message, error) {
	raw, err := json.Marshal(fields)
	if err != nil {
		return m, err
	}
	p, err := memory.ParseMessage(raw)
	if err != nil {
		return m, err
	}
	m.Raw, m.Content, m.Tokens = p.Raw, p.Content, 0
	return m, nil
}

// usableHistory returns the stored messages that can go before the client's
// messages (next) without breaking the tool-call protocol: system messages
// are skipped; a tool result whose call is not kept (the window began in the
// middle of a call, or the call was dropped) is dropped; and an assistant
// message with tool calls is dropped, with its results, unless every call is
// answered by the tool messages after it — in the history, or, for the last
// one, at the start of next (the client answering the calls of the stored
// reply). Two messages without calls of one role that a drop leaves side
// by side are joined into one (oneMessage): strict upstreams refuse two
// user messages in a row. Each kept message is returned with Raw set (see
// rawOf).
func usableHistory(stored, next toolList) []memory.Message {
	out := make([]memory.Message, 0, len(stored.msgs))
	open := map[string]bool{} // call ids of the kept assistant message being answered
	dropped := false          // a message was left out after out's last
	for i := 0; i < len(stored.msgs); i++ {
		m := stored.msgs[i]
		switch {
		case memory.IsSystem(m.Role):
			continue
		case m.Role == "tool":
			if !open[stored.at(i).answers] {
				dropped = true
				continue // orphan
			}
			out, dropped = append(out, withRaw(m)), false
			continue
		}
		clear(open)
		var calls []string
		if m.Role == "assistant" { // only an assistant message's calls count
			calls = stored.at(i).calls
		}
		if len(calls) > 0 {
			if !answered(calls, stored.from(i+1), next) {
				// Skip the call and its partial results.
				for i+1 < len(stored.msgs) && stored.msgs[i+1].Role == "tool" {
					i++
				}
				dropped = true
				continue
			}
			for _, id := range calls {
				open[id] = true
			}
		}
		// Two messages without calls that a drop left side by side (a
		// question whose call went unanswered and the next) become one,
		// as withoutTools joins them.
		if n := len(out); dropped && len(calls) == 0 && n > 0 && out[n-1].Role == m.Role && !out[n-1].HasToolCalls() {
			if j, ok := oneMessage(out[n-1], withRaw(m)); ok {
				out[n-1], dropped = j, false
				continue
			}
		}
		out, dropped = append(out, withRaw(m)), false
	}
	return out
}

// withRaw returns m with Raw set to rawOf(m).
func withRaw(m memory.Message) memory.Message {
	m.Raw = rawOf(m)
	return m
}

// answered reports whether every call id is answered by the tool messages
// that follow: those leading after (stored), and when they run to its end,
// those leading next (the client's messages).
func answered(calls []string, after, next toolList) bool {
	got := map[string]bool{}
	lead := func(l toolList) bool { // reports whether l's messages are all tool results
		for i, m := range l.msgs {
			if m.Role != "tool" {
				return false
			}
			got[l.at(i).answers] = true
		}
		return true
	}
	if lead(after) {
		lead(next)
	}
	for _, id := range calls {
		if !got[id] {
			return false
		}
	}
	return true
}

// rawOf returns a stored message's Raw, or a minimal message object for one
// stored without it.
func rawOf(m memory.Message) json.RawMessage {
	if len(m.Raw) > 0 {
		return m.Raw
	}
	// Marshalling two strings cannot fail.
	b, _ := json.Marshal(struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}{m.Role, m.Content})
	return b
}
