// Package baseline builds the prompts the evaluation compares memgate
// against, from the same history and with the same tokenizer: the newest
// turns that fit the budget (last-N truncation), and the full history with no
// budget.
package baseline

import "encoding/json"

// Counter counts what messages cost in a prompt; *tokens.Counter implements
// it.
type Counter interface {
	// Messages is the cost of a whole request's message list.
	Messages(model string, msgs []json.RawMessage) int
	// RawMessage is the cost of one message inside a list.
	RawMessage(model string, raw json.RawMessage) int
}

// Truncate returns system, then the newest messages of history that fit,
// oldest first, then question, such that the whole list costs at most budget
// tokens; the system messages and the question are always kept, even when
// they alone exceed the budget. The kept history never starts with an
// assistant message, so it reads as whole exchanges.
func Truncate(c Counter, model string, system, history []json.RawMessage, question json.RawMessage, budget int) []json.RawMessage {
	fixed := append(append([]json.RawMessage{}, system...), question)
	used := c.Messages(model, fixed)
	start := len(history)
	for start > 0 {
		cost := c.RawMessage(model, history[start-1])
		if used+cost > budget {
			break
		}
		used += cost
		start--
	}
	for start < len(history) && role(history[start]) == "assistant" {
		start++
	}
	out := make([]json.RawMessage, 0, len(system)+len(history)-start+1)
	out = append(out, system...)
	out = append(out, history[start:]...)
	return append(out, question)
}

// Full returns system, all of history, then question.
func Full(system, history []json.RawMessage, question json.RawMessage) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(system)+len(history)+1)
	out = append(out, system...)
	out = append(out, history...)
	return append(out, question)
}

// role reads a message's role ("" when it has none).
func role(raw json.RawMessage) string {
	var m struct {
		Role string `json:"role"`
	}
	_ = json.Unmarshal(raw, &m) // no role: treated as not an assistant turn
	return m.Role
}
