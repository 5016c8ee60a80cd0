package admin

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/dialect"
	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
)

// previewResponse is the answer of POST /v1/memory/preview.
type previewResponse struct {
	// API is the API the body was read as: chat, messages or responses.
	API string `json:"api"`
	// Messages are the assembled prompt as chat messages (the memory core's
	// answer, whatever the API).
	Messages []json.RawMessage `json:"messages"`
	// Body is the request body memgate would send upstream: the API's
	// adapter's rendering of Messages.
	Body           json.RawMessage `json:"body"`
	TokensOriginal int             `json:"tokens_original"`
	TokensSent     int             `json:"tokens_sent"`
	OverBudget     bool            `json:"over_budget"`
	Conversation   string          `json:"conversation"`
	// Budget and Parts are the assembly's token budget and its accounting
	// per part (see memory.Prepared).
	Budget int            `json:"budget"`
	Parts  map[string]int `json:"parts,omitempty"`
}

// handlePreview serves POST /v1/memory/preview?api=chat|messages|responses:
// the same body and headers as a request to that API (chat completions
// when api is absent), answered with the prompt memgate would assemble, the
// body it would send upstream, and their accounting. The upstream is never
// called; a failing memory layer is a 503, not a silent fallback. Errors
// are in OpenAI's shape, as on every management route.
func (a *Admin) handlePreview(c echo.Context) error {
	r := c.Request()
	api, ok := dialect.ParseAPI(c.QueryParam("api"))
	if !ok {
		return apierr.Invalid("api", "api must be chat, messages or responses.")
	}
	raw, aerr := apierr.ReadBody(c.Response(), r, a.maxBody)
	if aerr != nil {
		return aerr
	}
	req, aerr := dialect.Parse(api, raw)
	if aerr != nil {
		return aerr
	}
	if len(req.Messages) == 0 {
		return apierr.Invalid("input", "The request holds no message memory can read.")
	}
	id, mode, err := a.resolver.ResolveFor(tenantOf(r), r.Header, req.User)
	if err != nil {
		return identity.APIError(err)
	}
	if id.User == "" {
		return apierr.Invalid("X-Memory-User", "A memory preview needs a user: set X-Memory-User or the body's user.")
	}
	if a.preparer == nil {
		return apierr.Unavailable("Memory is not configured on this gateway.")
	}
	if id.Conversation == "" {
		id.Conversation = ImpliedConversation(r.Context(), a.preparer, id, req.Messages, a.keep)
	}
	mreq, aerr := req.Memory(r.Header, id, mode, memory.Cut{})
	if aerr != nil {
		return aerr
	}
	p, err := a.preparer.Prepare(r.Context(), mreq)
	if err != nil {
		a.log.Warn("memory preview failed", "request_id", server.RequestID(c), "error", err)
		return apierr.Unavailable("Memory could not be loaded.")
	}
	body, err := req.Render(p)
	if err != nil {
		a.log.Warn("memory preview render failed", "request_id", server.RequestID(c), "api", string(api), "error", err)
		return &apierr.Error{Status: http.StatusInternalServerError, Type: apierr.TypeServer, Message: "The assembled prompt could not be rendered."}
	}
	c.Response().Header()["X-Memory-Conversation"] = []string{id.Conversation}
	apierr.WriteJSON(c.Response(), http.StatusOK, previewResponse{
		API: string(api), Messages: p.Messages, Body: body,
		TokensOriginal: p.TokensOriginal, TokensSent: p.TokensSent,
		OverBudget: p.OverBudget, Conversation: id.Conversation,
		Budget: p.Budget, Parts: p.Parts,
	})
	return nil
}
