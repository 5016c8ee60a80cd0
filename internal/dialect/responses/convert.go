package responses

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/memgate/memgate/internal/dialect/body"
	"github.com/memgate/memgate/internal/dialect/chat"
)

// item is an input or output item, as far as memgate reads it.
type item struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
	Summary   []struct {
		Text string `json:"text"`
	} `json:"summary"`
	// Phase is an assistant message's: "commentary" (a preamble, more
	// output follows) or "final_answer"; "" from models that set none.
	Phase string `json:"phase"`
}

// kind is the item's type; a typeless item with a role is a message.
func (it item) kind() string {
	if it.Type == "" && it.Role != "" {
		return "message"
	}
	return it.Type
}

// part is a message item's content part.
type part struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL string `json:"image_url"`
	Detail   string `json:"detail"`
	FileData string `json:"file_data"`
	FileID   string `json:"file_id"`
	Filename string `json:"filename"`
}

// parts converts a message item's content to chat parts, and returns its
// refusal text (assistant output) apart.
func (it item) parts() ([]chat.Part, string) {
	c := it.Content
	if len(c) == 0 || string(c) == "null" {
		return nil, ""
	}
	if c[0] == '"' {
		var s string
		if json.Unmarshal(c, &s) != nil || s == "" {
			return nil, ""
		}
		return []chat.Part{{Type: "text", Text: s}}, ""
	}
	var ps []part
	if json.Unmarshal(c, &ps) != nil {
		return nil, ""
	}
	var (
		out     []chat.Part
		refusal strings.Builder
	)
	for _, p := range ps {
		switch p.Type {
		case "input_text", "output_text", "text":
			out = append(out, chat.Part{Type: "text", Text: p.Text})
		case "refusal":
			refusal.WriteString(p.Refusal)
		case "input_image":
			if p.ImageURL != "" {
				out = append(out, chat.Part{Type: "image_url", ImageURL: &chat.ImageURL{URL: p.ImageURL, Detail: p.Detail}})
			}
		case "input_file":
			if p.FileData != "" || p.FileID != "" {
				out = append(out, chat.Part{Type: "file", File: &chat.File{FileData: p.FileData, FileID: p.FileID, Filename: p.Filename}})
			}
		}
	}
	return out, refusal.String()
}

// assistant gathers the items of one model turn.
type assistant struct {
	origin    int
	text      strings.Builder
	refusal   strings.Builder
	reasoning []string
	calls     []chat.ToolCall
}

// message returns the gathered turn as a chat assistant message.
func (a *assistant) message() chat.Message {
	return chat.Assistant(a.text.String(), a.calls, strings.Join(a.reasoning, "\n"), a.refusal.String())
}

// add folds an assistant-side item into the turn; it reports false for an
// item that is not one.
func (a *assistant) add(it item) bool {
	switch {
	case it.kind() == "message" && it.Role == "assistant":
		ps, refusal := it.parts()
		for _, p := range ps {
			a.text.WriteString(p.Text)
		}
		a.refusal.WriteString(refusal)
	case it.Type == "function_call":
		a.calls = append(a.calls, chat.ToolCall{ID: it.CallID, Type: "function", Function: chat.Function{Name: it.Name, Arguments: it.Arguments}})
	case it.Type == "reasoning":
		for _, s := range it.Summary {
			a.reasoning = append(a.reasoning, s.Text)
		}
	default:
		return false
	}
	return true
}

// toChat converts input items to chat messages and returns, for each, the
// index of the item it starts at. Request input and captured output go
// through the same assistant grouping, so a reply the client sends back as
// input has the fingerprint capture stored it under.
func toChat(items []item) ([]chat.Message, []int, error) {
	var (
		out     []chat.Message
		origins []int
		cur     *assistant
	)
	flush := func() {
		if cur != nil {
			out = append(out, cur.message())
			origins = append(origins, cur.origin)
			cur = nil
		}
	}
	for i, it := range items {
		if cur == nil {
			cur = &assistant{origin: i}
			if !cur.add(it) {
				cur = nil
			} else {
				continue
			}
		} else if cur.add(it) {
			continue
		}
		flush()
		switch it.kind() {
		case "message":
			switch it.Role {
			case "user", "system", "developer":
			default:
				return nil, nil, body.Invalid("input["+strconv.Itoa(i)+"].role", "role must be user, assistant, system or developer, not %q", it.Role)
			}
			ps, _ := it.parts()
			c := chat.Content(ps)
			if c == nil {
				c = chat.Text("")
			}
			out = append(out, chat.Message{Role: it.Role, Content: c})
			origins = append(origins, i)
		case "function_call_output":
			out = append(out, chat.Message{Role: "tool", ToolCallID: it.CallID, Content: chat.Text(outputText(it.Output))})
			origins = append(origins, i)
		}
	}
	flush()
	return out, origins, nil
}

// outputText flattens a function_call_output's output: a string, or parts
// whose text is joined with "\n".
func outputText(o json.RawMessage) string {
	if len(o) == 0 || string(o) == "null" {
		return ""
	}
	if o[0] == '"' {
		var s string
		if json.Unmarshal(o, &s) == nil {
			return s
		}
		return ""
	}
	ps, _ := item{Content: o}.parts()
	return chat.TextOf(ps)
}

// inPart is a content part memgate writes for a stored user turn.
type inPart struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL string `json:"image_url,omitempty"`
	Detail   string `json:"detail,omitempty"`
	FileData string `json:"file_data,omitempty"`
	FileID   string `json:"file_id,omitempty"`
	Filename string `json:"filename,omitempty"`
}

// storedItem is an input item memgate writes for a stored turn.
type storedItem struct {
	Type      string  `json:"type"`
	Role      string  `json:"role,omitempty"`
	Content   any     `json:"content,omitempty"`
	CallID    string  `json:"call_id,omitempty"`
	Name      string  `json:"name,omitempty"`
	Arguments string  `json:"arguments,omitempty"`
	Output    *string `json:"output,omitempty"`
}

// fromChat converts a stored chat message to input items: a user message
// (text as a string, else input parts), an assistant message (its text)
// followed by its function_call items, or a function_call_output. Reasoning
// is left out (the provider's encrypted reasoning is not kept).
func fromChat(raw json.RawMessage) ([]storedItem, error) {
	m, parts, err := chat.Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("stored turn: %w", err)
	}
	switch m.Role {
	case "user":
		var ps []inPart
		allText := true
		for _, p := range parts {
			switch p.Type {
			case "text":
				ps = append(ps, inPart{Type: "input_text", Text: p.Text})
			case "image_url":
				ps = append(ps, inPart{Type: "input_image", ImageURL: p.ImageURL.URL, Detail: orAuto(p.ImageURL.Detail)})
				allText = false
			case "file":
				ps = append(ps, inPart{Type: "input_file", FileData: p.File.FileData, FileID: p.File.FileID, Filename: p.File.Filename})
				allText = false
			}
		}
		if len(ps) == 0 {
			return nil, nil
		}
		if allText {
			return []storedItem{{Type: "message", Role: "user", Content: chat.TextOf(parts)}}, nil
		}
		return []storedItem{{Type: "message", Role: "user", Content: ps}}, nil
	case "assistant":
		var out []storedItem
		text := chat.TextOf(parts)
		if m.Refusal != "" {
			text = strings.TrimSpace(text + "\n" + m.Refusal)
		}
		if text != "" {
			out = append(out, storedItem{Type: "message", Role: "assistant", Content: text})
		}
		for _, tc := range m.ToolCalls {
			out = append(out, storedItem{Type: "function_call", CallID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		return out, nil
	case "tool":
		s := chat.TextOf(parts)
		return []storedItem{{Type: "function_call_output", CallID: m.ToolCallID, Output: &s}}, nil
	}
	return nil, nil
}

func orAuto(detail string) string {
	if detail == "" {
		return "auto"
	}
	return detail
}
