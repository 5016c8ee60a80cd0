package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/memgate/memgate/internal/dialect/body"
	"github.com/memgate/memgate/internal/memory"
)

// Conversation is a request's conversation as chat messages for the memory
// core, each with the place in the client's body it came from. The dialect
// adapters embed it in their Request.
type Conversation struct {
	// Messages is the conversation in chat format (the memory.Request's
	// Messages); Parsed holds them read by memory.ParseMessage, index for
	// index.
	Messages []json.RawMessage
	Parsed   []memory.Message
	// Origin[i] is the index of the client's message or item Messages[i]
	// starts at; -1 for a system prompt the body holds outside them.
	Origin []int
}

// Add encodes m and appends it, from the client's message or item origin.
func (c *Conversation) Add(m Message, origin int) (memory.Message, error) {
	msg, err := Encode(m)
	if err != nil {
		return memory.Message{}, err
	}
	c.Messages = append(c.Messages, msg.Raw)
	c.Parsed = append(c.Parsed, msg)
	c.Origin = append(c.Origin, origin)
	return msg, nil
}

// Assembled is an assembled prompt (inject's Prepared.Messages for a
// Conversation) read back against the conversation.
type Assembled struct {
	// Memory is the text of every system message that is not the client's
	// own, joined by a blank line ("" when there are none).
	Memory string
	// Stored are the stored turns inject added before the client's kept
	// messages, in order.
	Stored []json.RawMessage
	// First is the origin of the first client message inject kept.
	First int
}

// Read reads the assembled prompt p. own reports whether a system message
// is one of the client's own; the client's kept messages are a suffix of
// the conversation's messages that own does not claim, and none is First
// when inject kept none of them.
func (c *Conversation) Read(p []json.RawMessage, own func(json.RawMessage) bool, none int) (Assembled, error) {
	var texts []string
	var rest []json.RawMessage
	for _, m := range p {
		var head struct {
			Role string `json:"role"`
		}
		if err := json.Unmarshal(m, &head); err != nil {
			return Assembled{}, fmt.Errorf("render: assembled message: %w", err)
		}
		if !memory.IsSystem(head.Role) {
			rest = append(rest, m)
			continue
		}
		if own(m) {
			continue
		}
		pm, err := memory.ParseMessage(m)
		if err != nil {
			return Assembled{}, fmt.Errorf("render: memory block: %w", err)
		}
		if pm.Content != "" {
			texts = append(texts, pm.Content)
		}
	}

	// The client's messages p kept are a suffix of rest; what precedes them
	// is stored history.
	var client []json.RawMessage
	var origin []int
	for i, m := range c.Messages {
		if !own(m) {
			client = append(client, m)
			origin = append(origin, c.Origin[i])
		}
	}
	i, j := len(rest), len(client)
	for i > 0 && j > 0 && bytes.Equal(rest[i-1], client[j-1]) {
		i, j = i-1, j-1
	}
	a := Assembled{Memory: strings.Join(texts, "\n\n"), Stored: rest[:i], First: none}
	if j < len(client) {
		a.First = origin[j]
	}
	return a, nil
}

// AppendText returns a body member that holds a prompt (a system prompt,
// instructions) with text appended: text alone when the member is absent
// (nil), the member's string and text with a blank line between when it is
// a string, and the member's array with elem (text as the dialect's array
// element) added when it is an array.
func AppendText(member json.RawMessage, text string, elem any) (json.RawMessage, error) {
	switch {
	case member == nil:
		return body.Marshal(text)
	case member[0] == '"':
		var s string
		if err := json.Unmarshal(member, &s); err != nil {
			return nil, err
		}
		if s != "" {
			text = s + "\n\n" + text
		}
		return body.Marshal(text)
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(member, &elems); err != nil {
		return nil, err
	}
	b, err := body.Marshal(elem)
	if err != nil {
		return nil, err
	}
	return body.Array(append(elems, b)), nil
}
