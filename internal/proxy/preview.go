package proxy

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"
)

// previewResponse is the answer of POST /v1/memory/preview.
type previewResponse struct {
	Messages       []json.RawMessage `json:"messages"`
	TokensOriginal int               `json:"tokens_original"`
	TokensSent     int               `json:"tokens_sent"`
	OverBudget     bool              `json:"over_budget"`
	Conversation   string            `json:"conversation"`
	// Budget and Parts are the assembly's token budget and its accounting
	// per part (see memory.Prepared).
	Budget int            `json:"budget"`
	Parts  map[string]int `json:"parts,omitempty"`
}

// handlePreview serves POST /v1/memory/preview: the same body and headers as
// a chat completion, answered with the messages memgate would send upstream
// and their accounting. The upstream is never called; a failing memory layer
// is a 503, not a silent fallback.
func (s *Server) handlePreview(w *echo.Response, r *http.Request, x *exchange) {
	buf, aerr := readBody(r, s.cfg.MaxBodyBytes)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	body, aerr := parseChat(buf)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	parsed, aerr := parseMessages(body.messages)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	id, mode, aerr := s.identify(r.Header, body.user)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if id.User == "" {
		writeError(w, invalid("X-Memory-User", "A memory preview needs a user: set X-Memory-User or the body's user."))
		return
	}
	if s.deps.Preparer == nil {
		writeError(w, &apiError{Status: http.StatusServiceUnavailable, Type: typeServer, Code: "memory_unavailable", Message: "Memory is not configured on this gateway."})
		return
	}
	if id.Conversation == "" {
		id.Conversation = newConversationID()
	}
	req, aerr := memoryRequest(r.Header, id, mode, &body, parsed)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	p, err := s.deps.Preparer.Prepare(r.Context(), req)
	if err != nil {
		s.log.Warn("memory preview failed", "request_id", x.id, "error", err)
		writeError(w, &apiError{Status: http.StatusServiceUnavailable, Type: typeServer, Code: "memory_unavailable", Message: "Memory could not be loaded."})
		return
	}
	w.Header()["X-Memory-Conversation"] = []string{id.Conversation}
	out, err := json.Marshal(previewResponse{
		Messages: p.Messages, TokensOriginal: p.TokensOriginal, TokensSent: p.TokensSent,
		OverBudget: p.OverBudget, Conversation: id.Conversation,
		Budget: p.Budget, Parts: p.Parts,
	})
	if err != nil {
		writeError(w, &apiError{Status: http.StatusInternalServerError, Type: typeServer, Message: "The preview could not be encoded."})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(out)
}
