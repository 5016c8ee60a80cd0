package prompt

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/memgate/memgate/internal/memory"
)

// withCallIDs returns the stored messages with an id for every tool call
// stored without one (a provider that sent a call with no id or an empty
// one) and the same id on the tool results that answer it: every API
// memgate replays to rejects an empty id (a Responses function_call
// without call_id, an Anthropic tool_use without id, a chat tool call with
// an empty one), which would fail every later request of the
// conversation.
//
// A call's id is "call_" and a hash of its message's key (else its
// sequence number and JSON) and its place among the message's calls: the
// same on every request, so the prompt's prefix stays cacheable, and
// different for every call. The results without an id that follow the
// message answer its calls without an id in order, as such providers
// answer them. A call no stored result answers keeps its empty id when
// the results run to the end of stored: the client's own next messages
// may answer it without one, and the pair it built must still match.
// The messages given are never changed (they may be a cache's); those
// rewritten are new, their other members as they were, keys in order, and
// their tools read again.
func withCallIDs(l toolList) toolList {
	stored := l.msgs
	out := copyOnWrite{l: l}
	for i := 0; i < len(stored); i++ {
		m := stored[i]
		if m.Role != "assistant" {
			continue
		}
		calls := l.at(i).calls
		var empty []int
		for k, id := range calls {
			if id == "" {
				empty = append(empty, k)
			}
		}
		if len(empty) == 0 {
			continue
		}
		end := i + 1
		var results []int
		for ; end < len(stored) && stored[end].Role == "tool"; end++ {
			if l.at(end).answers == "" {
				results = append(results, end)
			}
		}
		if end == len(stored) && len(results) < len(empty) {
			empty = empty[:len(results)]
		}
		if len(empty) == 0 {
			continue
		}
		ids := make(map[int]string, len(empty))
		for _, k := range empty {
			ids[k] = syntheticCallID(m, k)
		}
		if rm, ok := withToolIDs(m, ids); ok {
			out.set(i, rm)
		} else {
			continue // not rewritable: left as it is, dropped as unanswered
		}
		for n, at := range results[:min(len(results), len(empty))] {
			if rm, ok := withAnswerID(stored[at], ids[empty[n]]); ok {
				out.set(at, rm)
			}
		}
	}
	return out.l
}

// copyOnWrite is a list of messages that copies itself on its first
// change, so the list it was made from (a cache's) is never changed.
type copyOnWrite struct {
	l      toolList
	copied bool
}

// set replaces message i, and what toolInfo reads of it.
func (c *copyOnWrite) set(i int, m memory.Message) {
	if !c.copied {
		ts := make([]tools, len(c.l.msgs))
		copy(ts, c.l.tools)
		c.l = toolList{msgs: slices.Clone(c.l.msgs), tools: ts}
		c.copied = true
	}
	c.l.msgs[i] = m
	c.l.tools[i].calls, c.l.tools[i].answers = toolInfo(m)
}

// syntheticCallID is the id withCallIDs gives the k-th tool call of m.
func syntheticCallID(m memory.Message, k int) string {
	h := sha256.New()
	if m.Key != "" {
		h.Write([]byte(m.Key))
	} else {
		h.Write([]byte(strconv.FormatInt(m.Seq, 10)))
		h.Write([]byte{0})
		h.Write(m.Raw)
	}
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(k)))
	return "call_" + hex.EncodeToString(h.Sum(nil)[:12])
}

// withToolIDs returns the assistant message m with the id of its k-th
// tool call set to ids[k], for each k of ids; false when m's JSON does
// not hold its tool calls as an array of objects.
func withToolIDs(m memory.Message, ids map[int]string) (memory.Message, bool) {
	obj, ok := members(m.Raw)
	if !ok {
		return m, false
	}
	var calls []map[string]json.RawMessage
	if json.Unmarshal(obj[toolCallsKey(obj)], &calls) != nil {
		return m, false
	}
	for k, id := range ids {
		if k >= len(calls) || calls[k] == nil {
			return m, false
		}
		setMember(calls[k], "id", jsonString(id))
	}
	b, ok := encode(calls)
	if !ok {
		return m, false
	}
	obj[toolCallsKey(obj)] = b
	return withMembers(m, obj)
}

// withAnswerID returns the tool message m with tool_call_id set to id.
func withAnswerID(m memory.Message, id string) (memory.Message, bool) {
	obj, ok := members(m.Raw)
	if !ok {
		return m, false
	}
	setMember(obj, "tool_call_id", jsonString(id))
	return withMembers(m, obj)
}

// setMember sets obj's member key to v, removing the keys encoding/json
// would read as key (the same name in another case).
func setMember(obj map[string]json.RawMessage, key string, v json.RawMessage) {
	for k := range obj {
		if k != key && strings.EqualFold(k, key) {
			delete(obj, k)
		}
	}
	obj[key] = v
}

// toolCallsKey is the key of obj encoding/json reads as tool_calls: the
// exact one, else one in another case.
func toolCallsKey(obj map[string]json.RawMessage) string {
	if _, ok := obj["tool_calls"]; ok {
		return "tool_calls"
	}
	for k := range obj {
		if strings.EqualFold(k, "tool_calls") {
			return k
		}
	}
	return "tool_calls"
}

// members decodes a message's JSON object.
func members(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return nil, false
	}
	return obj, true
}

// withMembers returns m with Raw the object obj (keys sorted, as
// encoding/json writes a map, HTML left unescaped).
func withMembers(m memory.Message, obj map[string]json.RawMessage) (memory.Message, bool) {
	b, ok := encode(obj)
	if !ok {
		return m, false
	}
	m.Raw = b
	return m, true
}

// encode returns v as JSON without HTML escaping and without a newline.
func encode(v any) (json.RawMessage, bool) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return nil, false
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), true
}

// jsonString returns s as a JSON string.
func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s) // a string always encodes
	return b
}
