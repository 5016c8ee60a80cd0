package responses

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
//     (the memory block) and is appended to instructions after the app's
//     text, a blank line between (to an array of instructions as one more
//     developer message); the client's own system and developer items stay
//     where they were in input.
//   - The client's items that p keeps go upstream byte for byte; when
//     inject dropped the oldest to fit the budget, items are kept from the
//     first one p still holds a part of (system and developer items before
//     it stay).
//   - The stored turns p adds before them become input items and are
//     prepended: user and assistant messages, function_call and
//     function_call_output items. A stored function call whose output is
//     missing, or an output whose call is missing, is dropped, as the API
//     rejects both.
//   - With previous_response_id, or a conversation of the Conversations
//     API, the provider holds the history (ProviderHistory): the memory
//     block is added, stored turns are not. Nor are they to an input that
//     names a stored item by id (HeldHistory): the items up to it go first,
//     as the client sent them.
//
// A string input stays a string when nothing is prepended. Every other
// member of the body is forwarded as the client sent it.
func (r *Request) Render(p memory.Prepared) ([]byte, error) {
	a, err := r.Read(p, r.own, len(r.items))
	if err != nil {
		return nil, err
	}
	var stored []storedItem
	if !r.HeldHistory() {
		for _, raw := range a.Stored {
			its, err := fromChat(raw)
			if err != nil {
				return nil, fmt.Errorf("render: %w", err)
			}
			stored = append(stored, its...)
		}
	}

	obj := r.obj.Clone()
	// What this request recalled goes right before the current question in
	// input — except when the provider holds the history
	// (previous_response_id, a conversation): the provider would keep each
	// request's recall in the history it holds, so it joins the
	// instructions (a system-position block; a user-position one goes in
	// input all the same: no stored text in instructions).
	recalledInInput := a.Recalled != "" && (a.User || !r.ProviderHistory())
	var instrText []string
	if a.Memory != "" && !a.User {
		instrText = append(instrText, a.Memory)
	}
	if a.Recalled != "" && !recalledInInput {
		instrText = append(instrText, a.Recalled)
	}
	if len(instrText) > 0 {
		// To an array of instructions the memory is one more developer
		// message.
		text := strings.Join(instrText, "\n\n")
		instr, err := chat.AppendText(r.instructions, text, storedItem{Type: "message", Role: "developer", Content: text})
		if err != nil {
			return nil, fmt.Errorf("render: instructions: %w", err)
		}
		obj.Set("instructions", instr)
	}
	stableInInput := a.Memory != "" && a.User
	if len(stored) == 0 && a.First <= r.held && !recalledInInput && !stableInInput {
		return obj.Bytes(), nil // input unchanged
	}
	input, err := r.arrange(stored, a.First)
	if err != nil {
		return nil, err
	}
	role := "developer"
	if a.User {
		role = "user"
	}
	if recalledInInput {
		if input, err = r.placeRecalled(input, role, a.RecalledAt); err != nil {
			return nil, err
		}
	}
	if stableInInput {
		if input, err = insertMessage(input, conversationStart(input), "user", a.Memory); err != nil {
			return nil, err
		}
	}
	obj.Set("input", body.Array(input))
	return obj.Bytes(), nil
}

// placeRecalled returns input (arranged: the client's items from some
// index on are its tail) with each recalled block as a message item of
// role: a block one of the client's resent user messages was sent with
// (memory.keep_recall_resent) right before that message, as the request
// that asked it put it, so the input up to the previous question goes
// upstream as it went then; the others (a stored turn's, or none) right
// before the current question (questionAt). Blocks keep their order, each
// its own item, so the block a question keeps is the same item when the
// question is resent.
func (r *Request) placeRecalled(input []json.RawMessage, role string, blocks []chat.Placed) ([]json.RawMessage, error) {
	q := questionAt(input)
	shift := len(input) - len(r.items)
	type place struct {
		at   int
		text string
	}
	places := make([]place, 0, len(blocks))
	for _, b := range blocks {
		i := b.Before + shift
		if b.Before < 0 || i < 0 || i > q || !bytes.Equal(input[i], r.items[b.Before]) || !userMessage(input[i]) {
			i = q
		}
		places = append(places, place{i, b.Text})
	}
	slices.SortStableFunc(places, func(x, y place) int { return x.at - y.at })
	var err error
	for _, p := range slices.Backward(places) {
		if input, err = insertMessage(input, p.at, role, p.text); err != nil {
			return nil, err
		}
	}
	return input, nil
}

// userMessage reports whether raw is a user message item.
func userMessage(raw json.RawMessage) bool {
	var it item
	return json.Unmarshal(raw, &it) == nil && it.kind() == "message" && it.Role == "user"
}

// insertMessage returns items with a message item of role and text
// inserted at i.
func insertMessage(items []json.RawMessage, i int, role, text string) ([]json.RawMessage, error) {
	b, err := body.Marshal(storedItem{Type: "message", Role: role, Content: text})
	if err != nil {
		return nil, fmt.Errorf("render: memory: %w", err)
	}
	return slices.Insert(items, i, b), nil
}

// questionAt returns the index of the last user message among items (the
// current question), or 0 when there is none.
func questionAt(items []json.RawMessage) int {
	for i := len(items) - 1; i >= 0; i-- {
		if userMessage(items[i]) {
			return i
		}
	}
	return 0
}

// conversationStart returns the index of the first item that is not a
// system or developer message.
func conversationStart(items []json.RawMessage) int {
	for i, raw := range items {
		var it item
		if json.Unmarshal(raw, &it) != nil || it.kind() != "message" || (it.Role != "system" && it.Role != "developer") {
			return i
		}
	}
	return len(items)
}

// own reports whether m, a system message, is one of the client's own.
func (r *Request) own(m json.RawMessage) bool { return r.system[string(m)] }

// arrange returns the input items: the items the provider holds (see
// heldItems) and the client's system and developer items before first,
// the stored items (their orphaned calls and outputs
// dropped), then the client's items from first on — past leading outputs
// whose call was cut, when the client's items were cut.
func (r *Request) arrange(stored []storedItem, first int) ([]json.RawMessage, error) {
	kinds := make([]item, len(r.items))
	for i, raw := range r.items {
		_ = json.Unmarshal(raw, &kinds[i]) // parsed once already
	}
	var out []json.RawMessage
	for i := 0; i < first; i++ {
		if k := kinds[i]; i < r.held || k.kind() == "message" && (k.Role == "system" || k.Role == "developer") {
			out = append(out, r.items[i])
		}
	}
	for first > r.held && first < len(r.items)-1 && kinds[first].Type == "function_call_output" {
		first++
	}
	// Calls are answered by outputs anywhere after them; outputs answer
	// calls before them.
	answered := map[string]bool{}
	for _, k := range kinds[first:] {
		if k.Type == "function_call_output" {
			answered[k.CallID] = true
		}
	}
	for _, s := range stored {
		if s.Type == "function_call_output" {
			answered[s.CallID] = true
		}
	}
	called := map[string]bool{}
	stored = slices.DeleteFunc(slices.Clone(stored), func(s storedItem) bool {
		switch s.Type {
		case "function_call":
			if !answered[s.CallID] {
				return true
			}
			called[s.CallID] = true
		case "function_call_output":
			return !called[s.CallID]
		}
		return false
	})
	for _, s := range stored {
		b, err := body.Marshal(s)
		if err != nil {
			return nil, fmt.Errorf("render: stored item: %w", err)
		}
		out = append(out, b)
	}
	if r.inputString {
		// The synthetic item holds the client's string as a user message.
		return append(out, r.items...), nil
	}
	return append(out, r.items[first:]...), nil
}
