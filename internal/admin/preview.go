package admin

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/chatreq"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
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
func (a *Admin) handlePreview(c echo.Context) error {
	r := c.Request()
	raw, aerr := apierr.ReadBody(c.Response(), r, a.maxBody)
	if aerr != nil {
		return aerr
	}
	req, aerr := chatreq.Parse(raw)
	if aerr != nil {
		return aerr
	}
	id, mode, err := a.resolver.ResolveFor(tenantOf(r), r.Header, req.User)
	if err != nil {
		return apierr.FromIdentity(err)
	}
	if id.User == "" {
		return apierr.Invalid("X-Memory-User", "A memory preview needs a user: set X-Memory-User or the body's user.")
	}
	if a.preparer == nil {
		return apierr.Unavailable("Memory is not configured on this gateway.")
	}
	if id.Conversation == "" {
		id.Conversation = memory.ImpliedConversation(id.Tenant, id.User, req.Parsed)
	}
	mreq, aerr := req.Memory(r.Header, id, mode)
	if aerr != nil {
		return aerr
	}
	p, err := a.preparer.Prepare(r.Context(), mreq)
	if err != nil {
		a.log.Warn("memory preview failed", "request_id", server.RequestID(c), "error", err)
		return apierr.Unavailable("Memory could not be loaded.")
	}
	c.Response().Header()["X-Memory-Conversation"] = []string{id.Conversation}
	apierr.WriteJSON(c.Response(), http.StatusOK, previewResponse{
		Messages: p.Messages, TokensOriginal: p.TokensOriginal, TokensSent: p.TokensSent,
		OverBudget: p.OverBudget, Conversation: id.Conversation,
		Budget: p.Budget, Parts: p.Parts,
	})
	return nil
}
