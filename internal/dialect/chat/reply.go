package chat

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/memgate/memgate/internal/memory"
)

// ReplyFromJSON reads a non-streamed chat.completion body and returns the
// assistant message of choices[0] and the reported usage (nil when absent).
// The message's Raw is the message object in canonical form (see canonical),
// so it is JSON-equal to what StreamReply reassembles from the same answer.
// It fails with memory.ErrInvalid when the body is not a completion.
func ReplyFromJSON(body []byte) (memory.Message, *memory.Usage, error) {
	var resp struct {
		Choices []struct {
			Index   int             `json:"index"`
			Message json.RawMessage `json:"message"`
		} `json:"choices"`
		Usage *memory.Usage `json:"usage"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return memory.Message{}, nil, fmt.Errorf("%w: completion body: %v", memory.ErrInvalid, err)
	}
	var raw json.RawMessage
	for _, c := range resp.Choices {
		if c.Index == 0 {
			raw = c.Message
			break
		}
	}
	if len(raw) == 0 || string(raw) == "null" {
		return memory.Message{}, nil, fmt.Errorf("%w: completion has no choices[0].message", memory.ErrInvalid)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return memory.Message{}, nil, fmt.Errorf("%w: completion message: %v", memory.ErrInvalid, err)
	}
	seal(fields, true)
	msg, err := canonical(fields)
	if err != nil {
		return memory.Message{}, nil, err
	}
	return msg, resp.Usage, nil
}

// canonical turns a reply's message fields into a Message whose Raw is a
// stable encoding of the same object: fields whose value is null or an empty
// array are dropped (annotations: [], refusal: null, audio: null), the role
// defaults to assistant, and content is always present — the text when there
// is any, otherwise null beside tool calls and "" without them, which is what
// the upstream accepts when the message is sent back as history.
func canonical(fields map[string]json.RawMessage) (memory.Message, error) {
	for k, v := range fields {
		v = bytes.TrimSpace(v)
		if string(v) == "null" || isEmptyArray(v) {
			delete(fields, k)
		}
	}
	if _, ok := fields["role"]; !ok {
		fields["role"] = json.RawMessage(`"assistant"`)
	}
	if c, ok := fields["content"]; !ok || string(bytes.TrimSpace(c)) == `""` {
		if _, calls := fields["tool_calls"]; calls {
			fields["content"] = json.RawMessage(`null`)
		} else {
			fields["content"] = json.RawMessage(`""`)
		}
	}
	raw, err := json.Marshal(fields)
	if err != nil {
		return memory.Message{}, fmt.Errorf("%w: encode reply: %v", memory.ErrInvalid, err)
	}
	msg, err := memory.ParseMessage(raw)
	if err != nil {
		return memory.Message{}, fmt.Errorf("parse reply: %w", err)
	}
	return msg, nil
}

// ReasoningDetails is the member in which OpenRouter (and the APIs that
// copy it) returns a reply's reasoning as typed details
// (reasoning.text, with the provider's signature when it signs it;
// reasoning.summary; reasoning.encrypted), which it takes back, unaltered,
// with a tool loop's call. DetailsDigest is the member beside it where
// capture keeps the details' digest as received (memory.ReasoningDigest).
const (
	ReasoningDetails = "reasoning_details"
	DetailsDigest    = "reasoning_details_sha256"
)

// seal sets fields' DetailsDigest to the digest of its ReasoningDetails as
// the provider gave them, when there are some and lossless is true (they
// were read without loss, memory.Lossless); it drops a DetailsDigest the
// provider sent.
func seal(fields map[string]json.RawMessage, lossless bool) {
	delete(fields, DetailsDigest)
	d := fields[ReasoningDetails]
	if !lossless || len(d) == 0 || isEmptyArray(bytes.TrimSpace(d)) {
		return
	}
	if sum := memory.ReasoningDigest(d); sum != "" {
		fields[DetailsDigest], _ = json.Marshal(sum) // a hex string always encodes
	}
}

// isEmptyArray reports whether v is a JSON array with no elements.
func isEmptyArray(v []byte) bool {
	if len(v) < 2 || v[0] != '[' || v[len(v)-1] != ']' {
		return false
	}
	return len(bytes.TrimSpace(v[1:len(v)-1])) == 0
}
