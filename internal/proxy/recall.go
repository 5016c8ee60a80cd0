package proxy

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

	"github.com/memgate/memgate/internal/memory"
)

// RecallAdmin is what the facts and search management API needs. Every
// call is scoped to a tenant and user.
type RecallAdmin interface {
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

// recallRoutes registers the facts and search management API.
func (s *Server) recallRoutes(e *echo.Echo) {
	e.GET("/v1/memory/users/:user/facts", s.instrument("memory_admin", s.handleListFacts))
	e.POST("/v1/memory/users/:user/facts", s.instrument("memory_admin", s.handleAddFact))
	e.DELETE("/v1/memory/users/:user/facts/:id", s.instrument("memory_admin", s.handleDeleteFact))
	e.POST("/v1/memory/search", s.instrument("memory_admin", s.handleSearch))
}

// recallScope is adminScope for the recall API, answering 503 when recall
// is not configured.
func (s *Server) recallScope(r *http.Request, user string) (memory.Identity, *apiError) {
	if s.deps.Recall == nil {
		return memory.Identity{}, &apiError{Status: http.StatusServiceUnavailable, Type: typeServer, Code: "memory_unavailable", Message: "Recall is not configured on this gateway."}
	}
	return s.adminScope(r, user)
}

// factsPath splits /v1/memory/users/{user}/facts[/{id}] into user and id
// ("" when absent).
func factsPath(path string) (user, id string) {
	rest := strings.TrimPrefix(path, "/v1/memory/users/")
	user, rest, _ = strings.Cut(rest, "/")
	rest = strings.TrimPrefix(rest, "facts")
	return user, strings.TrimPrefix(rest, "/")
}

// recallError translates a recall error for the management API.
func (s *Server) recallError(x *exchange, err error) *apiError {
	switch {
	case errors.Is(err, memory.ErrInvalid):
		return invalid("", strings.TrimPrefix(err.Error(), memory.ErrInvalid.Error()+": "))
	case errors.Is(err, memory.ErrNotFound):
		return &apiError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: "not_found", Message: "No such fact for this user in this tenant."}
	}
	s.log.Error("recall error", "request_id", x.id, "error", err)
	return &apiError{Status: http.StatusServiceUnavailable, Type: typeServer, Code: "memory_unavailable", Message: "The memory store could not be reached."}
}

// decodeStrict reads a JSON object body into v, rejecting unknown fields.
func decodeStrict(r *http.Request, v any) *apiError {
	buf, aerr := readBody(r, maxRecallBody)
	if aerr != nil {
		return aerr
	}
	dec := json.NewDecoder(bytes.NewReader(buf))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("", "The request body is not the JSON object expected: "+err.Error())
	}
	if dec.More() {
		return invalid("", "The request body must hold one JSON object.")
	}
	return nil
}

// handleListFacts serves GET /v1/memory/users/{user}/facts[?history=true].
func (s *Server) handleListFacts(w *echo.Response, r *http.Request, x *exchange) {
	user, _ := factsPath(r.URL.Path)
	id, aerr := s.recallScope(r, user)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	history := false
	if h := r.URL.Query().Get("history"); h != "" {
		b, err := strconv.ParseBool(h)
		if err != nil {
			writeError(w, invalid("history", "history must be true or false."))
			return
		}
		history = b
	}
	facts, err := s.deps.Recall.Facts(r.Context(), id.Tenant, id.User, history)
	if err != nil {
		writeError(w, s.recallError(x, err))
		return
	}
	if facts == nil {
		facts = []memory.Fact{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": facts})
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
func (s *Server) handleAddFact(w *echo.Response, r *http.Request, x *exchange) {
	user, _ := factsPath(r.URL.Path)
	id, aerr := s.recallScope(r, user)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var req factRequest
	if aerr := decodeStrict(r, &req); aerr != nil {
		writeError(w, aerr)
		return
	}
	f := memory.Fact{Tenant: id.Tenant, User: id.User, Type: memory.FactType(req.Type), Key: req.Key, Value: req.Value, Pinned: req.Pinned, ExpiresAt: req.ExpiresAt}
	if req.Confidence != nil {
		if *req.Confidence <= 0 || *req.Confidence > 1 {
			writeError(w, invalid("confidence", "confidence must be greater than 0 and at most 1."))
			return
		}
		f.Confidence = *req.Confidence
	}
	cur, err := s.deps.Recall.AddFact(r.Context(), f)
	if err != nil {
		writeError(w, s.recallError(x, err))
		return
	}
	writeJSON(w, http.StatusOK, cur)
}

// handleDeleteFact serves DELETE /v1/memory/users/{user}/facts/{id}.
func (s *Server) handleDeleteFact(w *echo.Response, r *http.Request, x *exchange) {
	user, rawID := factsPath(r.URL.Path)
	id, aerr := s.recallScope(r, user)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	factID, err := strconv.ParseInt(rawID, 10, 64)
	if err != nil || factID <= 0 {
		writeError(w, invalid("id", "A fact id is a positive integer."))
		return
	}
	if err := s.deps.Recall.DeleteFact(r.Context(), id.Tenant, id.User, factID); err != nil {
		writeError(w, s.recallError(x, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": factID, "object": "fact", "deleted": true})
}

// searchRequest is the body of POST /v1/memory/search.
type searchRequest struct {
	User  string `json:"user"`
	Query string `json:"query"`
	TopK  int    `json:"top_k"`
}

// handleSearch serves POST /v1/memory/search {user, query, top_k}: the
// user's best memory items for query, with scores, best first.
func (s *Server) handleSearch(w *echo.Response, r *http.Request, x *exchange) {
	if s.deps.Recall == nil {
		_, aerr := s.recallScope(r, "")
		writeError(w, aerr)
		return
	}
	var req searchRequest
	if aerr := decodeStrict(r, &req); aerr != nil {
		writeError(w, aerr)
		return
	}
	id, aerr := s.recallScope(r, req.User)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	switch q := strings.TrimSpace(req.Query); {
	case q == "":
		writeError(w, invalid("query", "query must not be empty."))
		return
	case len(req.Query) > maxSearchQuery:
		writeError(w, invalid("query", "query must be at most "+strconv.Itoa(maxSearchQuery)+" bytes."))
		return
	}
	if req.TopK < 0 || req.TopK > maxSearchTopK {
		writeError(w, invalid("top_k", "top_k must be between 1 and "+strconv.Itoa(maxSearchTopK)+" (0 uses the configured default)."))
		return
	}
	items, err := s.deps.Recall.Search(r.Context(), id.Tenant, id.User, req.Query, req.TopK)
	if err != nil {
		writeError(w, s.recallError(x, err))
		return
	}
	if items == nil {
		items = []memory.Item{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": items})
}
