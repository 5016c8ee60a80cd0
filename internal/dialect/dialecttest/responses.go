package dialecttest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// responseItem is an input item of the fake's reading.
type responseItem struct {
	ID      string          `json:"id"`
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	CallID  string          `json:"call_id"`
	Output  json.RawMessage `json:"output"`
}

// openAIError writes OpenAI's error shape.
func openAIError(w http.ResponseWriter, status int, typ, param, msg string) {
	var p any
	if param != "" {
		p = param
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": p, "code": nil}})
}

// validateResponses enforces the input rules memgate must respect: a
// reasoning item is followed by an item that gives its id, every
// function_call and function_call_output has a call_id, no two
// function_calls share one, every function_call_output answers a
// function_call earlier in the input (or in the previous response) and
// no call has two, and previous_response_id names a response this fake
// gave out.
func (u *Upstream) validateResponses(items []responseItem, previous string) (string, error) {
	if previous != "" {
		u.mu.Lock()
		ok := u.responses[previous]
		u.mu.Unlock()
		if !ok {
			return "previous_response_id", fmt.Errorf("Previous response with id '%s' not found.", previous)
		}
		return "", nil
	}
	calls, outputs := map[string]bool{}, map[string]bool{}
	for i, it := range items {
		if it.Type == "reasoning" && (i+1 == len(items) || items[i+1].ID == "") {
			// The API pairs a reasoning item with the output item that
			// followed it by that item's id.
			return "input", fmt.Errorf("Item '%s' of type 'reasoning' was provided without its required following item.", it.ID)
		}
		if (it.Type == "function_call" || it.Type == "function_call_output") && it.CallID == "" {
			// What the API answers for a missing or empty call_id.
			param := fmt.Sprintf("input[%d].call_id", i)
			return param, fmt.Errorf("Missing required parameter: '%s'.", param)
		}
		switch it.Type {
		case "function_call":
			if calls[it.CallID] {
				return fmt.Sprintf("input[%d].call_id", i), fmt.Errorf("Duplicate function_call for call_id '%s'.", it.CallID)
			}
			calls[it.CallID] = true
		case "function_call_output":
			if !calls[it.CallID] {
				return fmt.Sprintf("input[%d]", i), fmt.Errorf("No tool call found for function call output with call_id %s.", it.CallID)
			}
			if outputs[it.CallID] {
				return fmt.Sprintf("input[%d].call_id", i), fmt.Errorf("Duplicate function_call_output for call_id '%s'. Each function_call must have exactly one matching function_call_output.", it.CallID)
			}
			outputs[it.CallID] = true
		}
	}
	return "", nil
}

// ResolveItemIDs makes the fake read an input item that gives the id of
// an item it stored (a response's output, a conversation's items) as that
// stored item, whatever content the request gives it: as a provider that
// looks items up by id would. Without it the fake reads each item as
// given.
func (u *Upstream) ResolveItemIDs() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.resolve = true
}

// resolveItems replaces each of items that gives the id of a stored item
// by the stored item, when the fake resolves ids (ResolveItemIDs).
func (u *Upstream) resolveItems(items []responseItem) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.resolve {
		return
	}
	stored := map[string]map[string]any{}
	for _, full := range u.stored {
		for _, it := range full["output"].([]map[string]any) {
			stored[fmt.Sprint(it["id"])] = it
		}
	}
	for _, its := range u.items {
		for _, it := range its {
			stored[fmt.Sprint(it["id"])] = it
		}
	}
	for i, it := range items {
		if s, ok := stored[it.ID]; ok && it.ID != "" {
			b, _ := json.Marshal(s) // the fake's own maps always encode
			var r responseItem
			if json.Unmarshal(b, &r) == nil {
				items[i] = r
			}
		}
	}
}

// conversations answers POST /v1/conversations: a new, empty conversation.
func (u *Upstream) conversations(w http.ResponseWriter, r *http.Request, _ []byte) {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		openAIError(w, http.StatusUnauthorized, "invalid_request_error", "", "You didn't provide an API key.")
		return
	}
	id := fmt.Sprintf("conv_fake%04d", u.next())
	u.mu.Lock()
	u.convs[id] = true
	u.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "conversation", "created_at": time.Now().Unix(), "metadata": map[string]any{}})
}

// conversationOf is the id a Responses body's conversation gives: the
// string or the object's id.
func conversationOf(c json.RawMessage) string {
	var id string
	if json.Unmarshal(c, &id) == nil {
		return id
	}
	var obj struct {
		ID string `json:"id"`
	}
	json.Unmarshal(c, &obj)
	return obj.ID
}

// responsesAPI answers POST /v1/responses.
func (u *Upstream) responsesAPI(w http.ResponseWriter, r *http.Request, body []byte) {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		openAIError(w, http.StatusUnauthorized, "invalid_request_error", "", "You didn't provide an API key.")
		return
	}
	var req struct {
		Model        string            `json:"model"`
		Stream       bool              `json:"stream"`
		Input        json.RawMessage   `json:"input"`
		Instructions json.RawMessage   `json:"instructions"`
		Tools        []json.RawMessage `json:"tools"`
		Previous     string            `json:"previous_response_id"`
		Conversation json.RawMessage   `json:"conversation"`
		Background   bool              `json:"background"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Model == "" {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "model", "A model and a JSON body are required.")
		return
	}
	var items []responseItem
	userText := ""
	if len(req.Input) > 0 && req.Input[0] == '"' {
		json.Unmarshal(req.Input, &userText)
	} else if err := json.Unmarshal(req.Input, &items); err != nil {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "input", "Invalid input: "+err.Error())
		return
	}
	conv := ""
	if c := req.Conversation; len(c) > 0 && string(c) != "null" {
		conv = conversationOf(c)
		u.mu.Lock()
		ok := u.convs[conv]
		u.mu.Unlock()
		if !ok {
			openAIError(w, http.StatusNotFound, "invalid_request_error", "conversation", fmt.Sprintf("Conversation with id '%s' not found.", conv))
			return
		}
	}
	u.resolveItems(items)
	if param, err := u.validateResponses(items, req.Previous); err != nil {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", param, err.Error())
		return
	}
	result := ""
	for _, it := range items {
		switch {
		case it.Type == "function_call_output":
			json.Unmarshal(it.Output, &result)
		case it.Role == "user":
			var s string
			if json.Unmarshal(it.Content, &s) != nil {
				var parts []struct{ Text string }
				json.Unmarshal(it.Content, &parts)
				for _, p := range parts {
					s += p.Text
				}
			}
			userText, result = s, ""
		}
	}
	n := u.next()
	id := fmt.Sprintf("resp_fake%04d", n)
	u.mu.Lock()
	u.responses[id] = true
	u.mu.Unlock()

	var output []map[string]any
	text := "You said: " + userText
	if result != "" {
		text = "The tool says: " + result + "."
	}
	wantCall := len(req.Tools) > 0 && result == ""
	if wantCall {
		text = "Let me check the weather."
	}
	msg := map[string]any{"id": fmt.Sprintf("msg_fake%04d", n), "type": "message", "status": "completed", "role": "assistant",
		"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}}}
	output = append(output, msg)
	if wantCall {
		output = append(output, map[string]any{"id": fmt.Sprintf("fc_fake%04d", n), "type": "function_call", "status": "completed",
			"call_id": fmt.Sprintf("call_fake%04d", n), "name": "get_weather", "arguments": `{"city":"Porto"}`})
	}
	inTokens, outTokens := len(body)/4, 10*len(output)
	resp := func(status string, out []map[string]any, usage any) map[string]any {
		if out == nil {
			out = []map[string]any{}
		}
		return map[string]any{
			"id": id, "object": "response", "created_at": time.Now().Unix(), "status": status, "error": nil,
			"incomplete_details": nil, "instructions": req.Instructions, "max_output_tokens": nil, "model": req.Model,
			"output": out, "parallel_tool_calls": true, "previous_response_id": nilIfEmpty(req.Previous),
			"reasoning": map[string]any{"effort": nil, "summary": nil}, "store": true, "temperature": 1.0,
			"text": map[string]any{"format": map[string]any{"type": "text"}}, "tool_choice": "auto", "tools": req.Tools,
			"top_p": 1.0, "truncation": "disabled", "usage": usage, "user": nil, "metadata": map[string]any{},
		}
	}
	usage := map[string]any{"input_tokens": inTokens, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": outTokens, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": inTokens + outTokens}
	u.keep(id, conv, userText, resp("completed", output, usage))
	if req.Background && !req.Stream {
		// Queued: the output is read later (GET /v1/responses/{id}).
		writeJSON(w, http.StatusOK, resp("queued", nil, nil))
		return
	}
	if !req.Stream {
		writeJSON(w, http.StatusOK, resp("completed", output, usage))
		return
	}
	s := newSSE(w)
	seq := 0
	ev := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		s.event(typ, fields)
	}
	ev("response.created", map[string]any{"response": resp("in_progress", nil, nil)})
	ev("response.in_progress", map[string]any{"response": resp("in_progress", nil, nil)})
	for i, item := range output {
		switch item["type"] {
		case "message":
			added := map[string]any{"id": item["id"], "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}
			ev("response.output_item.added", map[string]any{"output_index": i, "item": added})
			ev("response.content_part.added", map[string]any{"item_id": item["id"], "output_index": i, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}, "logprobs": []any{}}})
			for _, p := range pieces(text, 6) {
				ev("response.output_text.delta", map[string]any{"item_id": item["id"], "output_index": i, "content_index": 0, "delta": p, "logprobs": []any{}})
			}
			ev("response.output_text.done", map[string]any{"item_id": item["id"], "output_index": i, "content_index": 0, "text": text, "logprobs": []any{}})
			ev("response.content_part.done", map[string]any{"item_id": item["id"], "output_index": i, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}})
		case "function_call":
			added := map[string]any{"id": item["id"], "type": "function_call", "status": "in_progress", "call_id": item["call_id"], "name": item["name"], "arguments": ""}
			ev("response.output_item.added", map[string]any{"output_index": i, "item": added})
			args := item["arguments"].(string)
			for _, p := range []string{args[:len(args)/2], args[len(args)/2:]} {
				ev("response.function_call_arguments.delta", map[string]any{"item_id": item["id"], "output_index": i, "delta": p})
			}
			ev("response.function_call_arguments.done", map[string]any{"item_id": item["id"], "output_index": i, "arguments": args})
		}
		ev("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	ev("response.completed", map[string]any{"response": resp("completed", output, usage)})
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
