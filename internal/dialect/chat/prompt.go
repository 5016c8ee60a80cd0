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
	// Messages), each encoded and read once.
	Messages []memory.Message
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
	c.Messages = append(c.Messages, msg)
	c.Origin = append(c.Origin, origin)
	return msg, nil
}

// Assembled is an assembled prompt (inject's Prepared for a Conversation)
// read back against the conversation.
type Assembled struct {
	// Memory is the text of the stable memory blocks, joined by a blank
	// line ("" when there are none): the memory that changes rarely, which
	// follows the app's own system prompt.
	Memory string
	// Recalled is the text of what this request recalled ("" when none),
	// which goes right before the current turn.
	Recalled string
	// RecalledAt are Recalled's blocks one by one, each with the origin of
	// the client message it precedes in p (-1: a stored one, or none): an
	// API that renders blocks in place (memory.Request.BlocksInPlace)
	// puts a block an earlier turn was sent with back in that turn.
	RecalledAt []Placed
	// User reports that memory is to be sent in user role
	// (memory.position: user): no stored text in a system prompt.
	User bool
	// Stored are the stored turns inject added before the client's kept
	// messages, in order.
	Stored []json.RawMessage
	// First is the origin of the first client message inject kept.
	First int
}

// Placed is a memory block's text and the origin of the client message it
// precedes (-1 when that is a stored message, or nothing).
type Placed struct {
	Text   string
	Before int
}

// Read reads the assembled prompt p. own reports whether a system message
// is one of the client's own; the client's kept messages are a suffix of
// the conversation's messages that own does not claim, and none is First
// when inject kept none of them. The memory messages are p.Blocks; a p
// without Blocks has one stable block: every system message own does not
// claim.
func (c *Conversation) Read(p memory.Prepared, own func(json.RawMessage) bool, none int) (Assembled, error) {
	var stable, recalled []string
	var recalledBefore []int // for each recalled block, the index in rest it precedes
	var rest []json.RawMessage
	var a Assembled
	at := make(map[int]memory.Block, len(p.Blocks))
	for _, b := range p.Blocks {
		at[b.At] = b
	}
	for i, m := range p.Messages {
		if b, ok := at[i]; ok {
			var head struct {
				Role string `json:"role"`
			}
			if err := json.Unmarshal(m, &head); err != nil {
				return Assembled{}, fmt.Errorf("render: memory block: %w", err)
			}
			a.User = head.Role == "user"
			if b.Stable {
				stable = append(stable, b.Text)
			} else {
				recalled = append(recalled, b.Text)
				recalledBefore = append(recalledBefore, len(rest))
			}
			continue
		}
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
		if own(m) || len(p.Blocks) > 0 {
			continue
		}
		pm, err := memory.ParseMessage(m)
		if err != nil {
			return Assembled{}, fmt.Errorf("render: memory block: %w", err)
		}
		if pm.Content != "" {
			stable = append(stable, pm.Content)
		}
	}

	// The client's messages p kept are a suffix of rest; what precedes them
	// is stored history.
	var client []json.RawMessage
	var origin []int
	for i, m := range c.Messages {
		if !own(m.Raw) {
			client = append(client, m.Raw)
			origin = append(origin, c.Origin[i])
		}
	}
	i, j := len(rest), len(client)
	for i > 0 && j > 0 && bytes.Equal(rest[i-1], client[j-1]) {
		i, j = i-1, j-1
	}
	a.Memory, a.Recalled = strings.Join(stable, "\n\n"), strings.Join(recalled, "\n\n")
	a.Stored, a.First = rest[:i], none
	if j < len(client) {
		a.First = origin[j]
	}
	for k, text := range recalled {
		before := -1
		if n := recalledBefore[k]; n >= i && n < len(rest) {
			before = origin[j+n-i]
		}
		a.RecalledAt = append(a.RecalledAt, Placed{Text: text, Before: before})
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
