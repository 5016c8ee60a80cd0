package dialecttest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The fake's routes on what it stores, as OpenAI serves them: a response
// retrieved (whole, or streamed with ?stream=true), a conversation's
// items added and listed, and the Responses API's fixed sub-paths
// (input_tokens, compact), whose bodies name stored state as a create
// body does.

// keep stores response id, completed as full; in conversation conv (""
// for none) its input (the user's text) and its output become items.
func (u *Upstream) keep(id, conv, userText string, full map[string]any) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.stored[id] = full
	if conv == "" {
		return
	}
	u.items[conv] = append(u.items[conv], map[string]any{"id": "msg_in" + strings.TrimPrefix(id, "resp_"), "type": "message",
		"status": "completed", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": userText}}})
	for _, it := range full["output"].([]map[string]any) {
		u.items[conv] = append(u.items[conv], it)
	}
}

// authorized answers 401 when r carries no key.
func authorized(w http.ResponseWriter, r *http.Request) bool {
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		openAIError(w, http.StatusUnauthorized, "invalid_request_error", "", "You didn't provide an API key.")
		return false
	}
	return true
}

// retrieve answers GET /v1/responses/{id}: the completed response, or
// with ?stream=true its events from the start.
func (u *Upstream) retrieve(w http.ResponseWriter, r *http.Request, _ []byte) {
	if !authorized(w, r) {
		return
	}
	id := r.PathValue("id")
	u.mu.Lock()
	full, ok := u.stored[id]
	u.mu.Unlock()
	if !ok {
		openAIError(w, http.StatusNotFound, "invalid_request_error", "", fmt.Sprintf("Response with id '%s' not found.", id))
		return
	}
	if r.URL.Query().Get("stream") != "true" {
		writeJSON(w, http.StatusOK, full)
		return
	}
	s := newSSE(w)
	queued := map[string]any{}
	for k, v := range full {
		queued[k] = v
	}
	queued["status"], queued["output"] = "in_progress", []any{}
	s.event("response.in_progress", map[string]any{"type": "response.in_progress", "sequence_number": 0, "response": queued})
	s.event("response.completed", map[string]any{"type": "response.completed", "sequence_number": 1, "response": full})
}

// stateBody reads the states a sub-path or items body names, answering
// as the provider does for one it does not hold; false when it answered.
func (u *Upstream) stateBody(w http.ResponseWriter, body []byte) bool {
	var req struct {
		Previous     string          `json:"previous_response_id"`
		Conversation json.RawMessage `json:"conversation"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "", "A JSON body is required.")
		return false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if req.Previous != "" && !u.responses[req.Previous] {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "previous_response_id", fmt.Sprintf("Previous response with id '%s' not found.", req.Previous))
		return false
	}
	if c := req.Conversation; len(c) > 0 && string(c) != "null" && !u.convs[conversationOf(c)] {
		openAIError(w, http.StatusNotFound, "invalid_request_error", "conversation", fmt.Sprintf("Conversation with id '%s' not found.", conversationOf(c)))
		return false
	}
	return true
}

// inputTokens answers POST /v1/responses/input_tokens.
func (u *Upstream) inputTokens(w http.ResponseWriter, r *http.Request, body []byte) {
	if !authorized(w, r) || !u.stateBody(w, body) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "response.input_tokens", "input_tokens": len(body) / 4})
}

// compact answers POST /v1/responses/compact: a compacted response, whose
// output is the user's messages and a compaction item.
func (u *Upstream) compact(w http.ResponseWriter, r *http.Request, body []byte) {
	if !authorized(w, r) || !u.stateBody(w, body) {
		return
	}
	n := u.next()
	id := fmt.Sprintf("resp_fake%04d", n)
	u.mu.Lock()
	u.responses[id] = true
	u.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "response.compaction", "created_at": time.Now().Unix(),
		"output": []any{
			map[string]any{"id": fmt.Sprintf("msg_fake%04d", n), "type": "message", "status": "completed", "role": "user",
				"content": []any{map[string]any{"type": "input_text", "text": "compacted"}}},
			map[string]any{"id": fmt.Sprintf("cmp_fake%04d", n), "type": "compaction", "encrypted_content": "gAAAA-fake"},
		},
		"usage": map[string]any{"input_tokens": len(body) / 4, "output_tokens": 10, "total_tokens": len(body)/4 + 10}})
}

// conversation returns the conversation of r's path, answering 404 when
// the fake gave out no such id.
func (u *Upstream) conversation(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	u.mu.Lock()
	ok := u.convs[id]
	u.mu.Unlock()
	if !ok {
		openAIError(w, http.StatusNotFound, "invalid_request_error", "", fmt.Sprintf("Conversation with id '%s' not found.", id))
	}
	return id, ok
}

// itemList writes items as the Conversations API lists them.
func itemList(w http.ResponseWriter, items []map[string]any) {
	list := map[string]any{"object": "list", "data": items, "has_more": false, "first_id": nil, "last_id": nil}
	if len(items) > 0 {
		list["first_id"], list["last_id"] = items[0]["id"], items[len(items)-1]["id"]
	}
	writeJSON(w, http.StatusOK, list)
}

// addItems answers POST /v1/conversations/{id}/items: the items added,
// each given an id.
func (u *Upstream) addItems(w http.ResponseWriter, r *http.Request, body []byte) {
	if !authorized(w, r) {
		return
	}
	conv, ok := u.conversation(w, r)
	if !ok {
		return
	}
	var req struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "items", "items must be an array of items.")
		return
	}
	for _, it := range req.Items {
		it["id"] = fmt.Sprintf("msg_fake%04d", u.next())
	}
	u.mu.Lock()
	u.items[conv] = append(u.items[conv], req.Items...)
	u.mu.Unlock()
	itemList(w, req.Items)
}

// listItems answers GET /v1/conversations/{id}/items: every item, oldest
// first.
func (u *Upstream) listItems(w http.ResponseWriter, r *http.Request, _ []byte) {
	if !authorized(w, r) {
		return
	}
	conv, ok := u.conversation(w, r)
	if !ok {
		return
	}
	u.mu.Lock()
	items := append([]map[string]any{}, u.items[conv]...)
	u.mu.Unlock()
	itemList(w, items)
}
