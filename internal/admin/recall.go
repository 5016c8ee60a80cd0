package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
)

// Recall is what the facts and search routes need. Every call is scoped to
// a tenant and user.
type Recall interface {
	// Facts lists the user's current facts (history: superseded and expired too).
	Facts(ctx context.Context, tenant, user string, history bool) ([]memory.Fact, error)
	// AddFact validates and records a fact (memory.ErrInvalid names a bad field).
	AddFact(ctx context.Context, f memory.Fact) (memory.Fact, error)
	// DeleteFact deletes one fact, or returns memory.ErrNotFound.
	DeleteFact(ctx context.Context, tenant, user string, id int64) error
	// Search returns the user's best memory items for query, best first.
	Search(ctx context.Context, tenant, user, query string, topK int) ([]memory.Item, error)
}

// Limits of the recall management API.
const (
	maxRecallBody  = 64 << 10
	maxSearchQuery = 4000
	maxSearchTopK  = 50
)

// recallScope is scope for the recall routes, answering 503 when recall is
// not configured.
func (a *Admin) recallScope(c echo.Context, user, where string) (memory.Identity, *apierr.Error) {
	if a.recall == nil {
		return memory.Identity{}, apierr.Unavailable("Recall is not configured on this gateway.")
	}
	return a.scope(c.Request(), user, where)
}

// recallError translates a recall error for the management API.
func (a *Admin) recallError(c echo.Context, err error) *apierr.Error {
	switch {
	case errors.Is(err, memory.ErrInvalid):
		return apierr.Invalid("", strings.TrimPrefix(err.Error(), memory.ErrInvalid.Error()+": "))
	case errors.Is(err, memory.ErrNotFound):
		return &apierr.Error{Status: http.StatusNotFound, Type: apierr.TypeInvalidRequest, Code: "not_found", Message: "No such fact for this user in this tenant."}
	}
	a.log.Error("recall error", "request_id", server.RequestID(c), "error", err)
	return apierr.Unavailable("The memory store could not be reached.")
}

// decodeStrict reads a JSON object body into v, rejecting unknown fields.
func decodeStrict(c echo.Context, v any) *apierr.Error {
	buf, aerr := apierr.ReadBody(c.Response(), c.Request(), maxRecallBody)
	if aerr != nil {
		return aerr
	}
	dec := json.NewDecoder(bytes.NewReader(buf))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return apierr.Invalid("", "The request body is not the JSON object expected: "+err.Error())
	}
	if dec.More() {
		return apierr.Invalid("", "The request body must hold one JSON object.")
	}
	return nil
}

// handleListFacts serves GET /v1/memory/users/{user}/facts[?history=true].
func (a *Admin) handleListFacts(c echo.Context) error {
	id, aerr := a.recallScope(c, c.Param("user"), userInPath)
	if aerr != nil {
		return aerr
	}
	history := false
	if h := c.QueryParam("history"); h != "" {
		b, err := strconv.ParseBool(h)
		if err != nil {
			return apierr.Invalid("history", "history must be true or false.")
		}
		history = b
	}
	facts, err := a.recall.Facts(c.Request().Context(), id.Tenant, id.User, history)
	if err != nil {
		return a.recallError(c, err)
	}
	if facts == nil {
		facts = []memory.Fact{}
	}
	apierr.WriteJSON(c.Response(), http.StatusOK, map[string]any{"object": "list", "data": facts})
	return nil
}

// factRequest is the body of POST /v1/memory/users/{user}/facts.
type factRequest struct {
	Type       string     `json:"type"`
	Key        string     `json:"key"`
	Value      string     `json:"value"`
	Confidence *float64   `json:"confidence"`
	Pinned     bool       `json:"pinned"`
	ExpiresAt  *time.Time `json:"expires_at"`
}

// handleAddFact serves POST /v1/memory/users/{user}/facts: add a fact, or
// pin one (the same type, key and value with "pinned": true).
func (a *Admin) handleAddFact(c echo.Context) error {
	id, aerr := a.recallScope(c, c.Param("user"), userInPath)
	if aerr != nil {
		return aerr
	}
	var req factRequest
	if aerr := decodeStrict(c, &req); aerr != nil {
		return aerr
	}
	f := memory.Fact{Tenant: id.Tenant, User: id.User, Type: memory.FactType(req.Type), Key: req.Key, Value: req.Value, Pinned: req.Pinned, ExpiresAt: req.ExpiresAt}
	if req.Confidence != nil {
		if *req.Confidence <= 0 || *req.Confidence > 1 {
			return apierr.Invalid("confidence", "confidence must be greater than 0 and at most 1.")
		}
		f.Confidence = *req.Confidence
	}
	cur, err := a.recall.AddFact(c.Request().Context(), f)
	if err != nil {
		return a.recallError(c, err)
	}
	apierr.WriteJSON(c.Response(), http.StatusOK, cur)
	return nil
}

// handleDeleteFact serves DELETE /v1/memory/users/{user}/facts/{id}.
func (a *Admin) handleDeleteFact(c echo.Context) error {
	id, aerr := a.recallScope(c, c.Param("user"), userInPath)
	if aerr != nil {
		return aerr
	}
	rawID := c.Param("id")
	factID, err := strconv.ParseInt(rawID, 10, 64)
	if err != nil || factID <= 0 {
		return apierr.Invalid("id", "A fact id is a positive integer.")
	}
	if err := a.recall.DeleteFact(c.Request().Context(), id.Tenant, id.User, factID); err != nil {
		return a.recallError(c, err)
	}
	apierr.WriteJSON(c.Response(), http.StatusOK, map[string]any{"id": factID, "object": "fact", "deleted": true})
	return nil
}

// searchRequest is the body of POST /v1/memory/search.
type searchRequest struct {
	User  string `json:"user"`
	Query string `json:"query"`
	TopK  int    `json:"top_k"`
}

// handleSearch serves POST /v1/memory/search {user, query, top_k}: the
// user's best memory items for query, with scores, best first.
func (a *Admin) handleSearch(c echo.Context) error {
	if a.recall == nil {
		_, aerr := a.recallScope(c, "", userInBody)
		return aerr
	}
	var req searchRequest
	if aerr := decodeStrict(c, &req); aerr != nil {
		return aerr
	}
	id, aerr := a.recallScope(c, req.User, userInBody)
	if aerr != nil {
		return aerr
	}
	switch q := strings.TrimSpace(req.Query); {
	case q == "":
		return apierr.Invalid("query", "query must not be empty.")
	case len(req.Query) > maxSearchQuery:
		return apierr.Invalid("query", "query must be at most "+strconv.Itoa(maxSearchQuery)+" bytes.")
	}
	if req.TopK < 0 || req.TopK > maxSearchTopK {
		return apierr.Invalid("top_k", "top_k must be between 1 and "+strconv.Itoa(maxSearchTopK)+" (0 uses the configured default).")
	}
	items, err := a.recall.Search(c.Request().Context(), id.Tenant, id.User, req.Query, req.TopK)
	if err != nil {
		return a.recallError(c, err)
	}
	if items == nil {
		items = []memory.Item{}
	}
	apierr.WriteJSON(c.Response(), http.StatusOK, map[string]any{"object": "list", "data": items})
	return nil
}
