package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/memgate/memgate/internal/dialect/body"
)

// Anthropic caches a prompt's prefix up to a block marked with
// cache_control (at most maxBreakpoints in a request) and bills reading it
// back at a tenth of the input price. With breakpoints on
// (Request.Breakpoints), Render marks, within what the app's own
// breakpoints leave of the four:
//
//  1. the stable memory block — the end of the part that changes only when
//     compaction or extraction changes it (the app's system prompt, pinned
//     facts, summary, facts): in system, or, in user position, the text
//     block opening the first message;
//  2. the last block of the turn before the current question — the end of
//     the recent turns, whose window moves in steps, so the next request
//     reads it back (Anthropic looks for earlier breakpoints up to 20
//     blocks back).
//
// The app's own breakpoints stay as they are and count against the four.

// maxBreakpoints is the most cache_control blocks a request may carry.
const maxBreakpoints = 4

// ephemeral is the cache_control memgate adds.
var ephemeral = json.RawMessage(`{"type":"ephemeral"}`)

// clientBreakpoints counts the app's own cache_control blocks in raw (every
// occurrence of the key: a text that spells it only makes memgate add
// fewer).
func clientBreakpoints(raw []byte) int {
	return bytes.Count(raw, []byte(`"cache_control"`))
}

// cacheableBlock reports whether a content block of type typ may carry
// cache_control.
func cacheableBlock(typ string) bool {
	switch typ {
	case "text", "image", "document", "tool_use", "tool_result":
		return true
	}
	return false
}

// markLastBlock returns the message raw with cache_control on its last
// content block (a string content becomes one text block), and whether it
// could: a last block that cannot carry one (thinking) or already does
// leaves raw as it was.
func markLastBlock(raw json.RawMessage) (json.RawMessage, bool, error) {
	obj, err := body.Parse(raw)
	if err != nil {
		return nil, false, fmt.Errorf("render: cache breakpoint: %w", err)
	}
	c := obj.Get("content")
	var blocks []json.RawMessage
	if len(c) > 0 && c[0] == '"' {
		var s string
		if err := json.Unmarshal(c, &s); err != nil || s == "" {
			return raw, false, nil
		}
		b, err := body.Marshal(outBlock{Type: "text", Text: s})
		if err != nil {
			return nil, false, fmt.Errorf("render: cache breakpoint: %w", err)
		}
		blocks = []json.RawMessage{b}
	} else if err := json.Unmarshal(c, &blocks); err != nil || len(blocks) == 0 {
		return raw, false, nil
	}
	last, err := body.Parse(blocks[len(blocks)-1])
	if err != nil {
		return raw, false, nil
	}
	var typ string
	if json.Unmarshal(last.Get("type"), &typ) != nil || !cacheableBlock(typ) || last.Has("cache_control") {
		return raw, false, nil
	}
	last.Set("cache_control", ephemeral)
	blocks[len(blocks)-1] = last.Bytes()
	obj.Set("content", body.Array(blocks))
	return obj.Bytes(), true, nil
}

// markFirstBlock returns the message raw with cache_control on its first
// text block after any tool results (where withTextAt put the stable
// memory), and whether it could.
func markFirstBlock(raw json.RawMessage) (json.RawMessage, bool, error) {
	obj, err := body.Parse(raw)
	if err != nil {
		return nil, false, fmt.Errorf("render: cache breakpoint: %w", err)
	}
	var blocks []json.RawMessage
	if json.Unmarshal(obj.Get("content"), &blocks) != nil {
		return raw, false, nil
	}
	for i, b := range blocks {
		bl, err := body.Parse(b)
		if err != nil {
			return raw, false, nil
		}
		var typ string
		_ = json.Unmarshal(bl.Get("type"), &typ)
		if typ == "tool_result" {
			continue
		}
		if typ != "text" || bl.Has("cache_control") {
			return raw, false, nil
		}
		bl.Set("cache_control", ephemeral)
		blocks[i] = bl.Bytes()
		obj.Set("content", body.Array(blocks))
		return obj.Bytes(), true, nil
	}
	return raw, false, nil
}

// systemWithBreakpoint returns the system member holding the app's system
// (member, nil when absent) and then memory as a text block marked
// cache_control: a string system becomes a text block before it.
func systemWithBreakpoint(member json.RawMessage, memory string) (json.RawMessage, error) {
	type cachedBlock struct {
		Type         string          `json:"type"`
		Text         string          `json:"text"`
		CacheControl json.RawMessage `json:"cache_control,omitempty"`
	}
	var blocks []json.RawMessage
	switch {
	case member == nil:
	case member[0] == '"':
		var s string
		if err := json.Unmarshal(member, &s); err != nil {
			return nil, err
		}
		if s != "" {
			b, err := body.Marshal(cachedBlock{Type: "text", Text: s})
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, b)
		}
	default:
		if err := json.Unmarshal(member, &blocks); err != nil {
			return nil, err
		}
	}
	b, err := body.Marshal(cachedBlock{Type: "text", Text: memory, CacheControl: ephemeral})
	if err != nil {
		return nil, err
	}
	return body.Array(append(blocks, b)), nil
}
