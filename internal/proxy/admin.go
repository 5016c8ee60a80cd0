package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/memory"
)

// MemoryAdmin is what the management API needs of the store. Every call is
// scoped to the caller's tenant.
type MemoryAdmin interface {
	Conversations(ctx context.Context, tenant, user string) ([]memory.Conversation, error)
	Conversation(ctx context.Context, id memory.Identity) (memory.Conversation, []memory.Message, error)
	DeleteConversation(ctx context.Context, id memory.Identity) error
	DeleteUser(ctx context.Context, tenant, user string) error
}

// adminRoutes registers the memory management API.
func (s *Server) adminRoutes(e *echo.Echo) {
	e.GET("/v1/memory/conversations", s.instrument("memory_admin", s.handleListConversations))
	e.GET("/v1/memory/conversations/:id", s.instrument("memory_admin", s.handleGetConversation))
	e.DELETE("/v1/memory/conversations/:id", s.instrument("memory_admin", s.handleDeleteConversation))
	e.DELETE("/v1/memory/users/:user", s.instrument("memory_admin", s.handleDeleteUser))
}

// adminScope resolves the caller's tenant (checking the gateway key when keys
// are configured) and the user the request addresses, from the `user` query
// parameter or, for /v1/memory/users/{user}, the path.
func (s *Server) adminScope(r *http.Request, user string) (memory.Identity, *apiError) {
	if s.deps.Admin == nil {
		return memory.Identity{}, &apiError{Status: http.StatusServiceUnavailable, Type: typeServer, Code: "memory_unavailable", Message: "Memory is not configured on this gateway."}
	}
	h := r.Header.Clone()
	// Identity headers that address memory are taken from the URL here.
	h.Del("X-Memory-User")
	h.Del("X-Memory-Conversation")
	h.Del("X-Memory-Mode")
	tenant := memory.DefaultTenant
	if s.deps.Resolver != nil {
		id, _, err := s.deps.Resolver.Resolve(h, "")
		if err != nil {
			return memory.Identity{}, identityError(err)
		}
		tenant = id.Tenant
	}
	if user == "" {
		return memory.Identity{}, invalid("user", "The user query parameter is required.")
	}
	if !memory.ValidID(user) {
		return memory.Identity{}, invalid("user", "user must be 1-128 characters of [A-Za-z0-9._:@-].")
	}
	return memory.Identity{Tenant: tenant, User: user}, nil
}

// conversationID reads and checks the {id} path segment.
func conversationID(r *http.Request) (string, *apiError) {
	id := strings.TrimPrefix(r.URL.Path, "/v1/memory/conversations/")
	if !memory.ValidID(id) {
		return "", invalid("id", "A conversation id must be 1-128 characters of [A-Za-z0-9._:@-].")
	}
	return id, nil
}

// storeError translates a store error for the management API.
func (s *Server) storeError(x *exchange, err error) *apiError {
	if errors.Is(err, memory.ErrNotFound) {
		return &apiError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: "not_found", Message: "No such conversation or user in this tenant."}
	}
	s.log.Error("memory store error", "request_id", x.id, "error", err)
	return &apiError{Status: http.StatusServiceUnavailable, Type: typeServer, Code: "memory_unavailable", Message: "The memory store could not be reached."}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, &apiError{Status: http.StatusInternalServerError, Type: typeServer, Message: "The response could not be encoded."})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// handleListConversations serves GET /v1/memory/conversations?user=U.
func (s *Server) handleListConversations(w *echo.Response, r *http.Request, x *exchange) {
	id, aerr := s.adminScope(r, r.URL.Query().Get("user"))
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	convs, err := s.deps.Admin.Conversations(r.Context(), id.Tenant, id.User)
	if err != nil {
		writeError(w, s.storeError(x, err))
		return
	}
	if convs == nil {
		convs = []memory.Conversation{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": convs})
}

// handleGetConversation serves GET /v1/memory/conversations/{id}?user=U.
func (s *Server) handleGetConversation(w *echo.Response, r *http.Request, x *exchange) {
	id, aerr := s.adminScope(r, r.URL.Query().Get("user"))
	if aerr == nil {
		id.Conversation, aerr = conversationID(r)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	conv, msgs, err := s.deps.Admin.Conversation(r.Context(), id)
	if err != nil {
		writeError(w, s.storeError(x, err))
		return
	}
	if msgs == nil {
		msgs = []memory.Message{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"conversation": conv, "messages": msgs})
}

// handleDeleteConversation serves DELETE /v1/memory/conversations/{id}?user=U.
func (s *Server) handleDeleteConversation(w *echo.Response, r *http.Request, x *exchange) {
	id, aerr := s.adminScope(r, r.URL.Query().Get("user"))
	if aerr == nil {
		id.Conversation, aerr = conversationID(r)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if err := s.deps.Admin.DeleteConversation(r.Context(), id); err != nil {
		writeError(w, s.storeError(x, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": id.Conversation, "object": "conversation", "deleted": true})
}

// handleDeleteUser serves DELETE /v1/memory/users/{user}: everything stored
// about the user in the caller's tenant is erased, and captures of the user
// still queued are dropped when they are processed.
func (s *Server) handleDeleteUser(w *echo.Response, r *http.Request, x *exchange) {
	id, aerr := s.adminScope(r, strings.TrimPrefix(r.URL.Path, "/v1/memory/users/"))
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if err := s.deps.Admin.DeleteUser(r.Context(), id.Tenant, id.User); err != nil {
		writeError(w, s.storeError(x, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"user": id.User, "object": "user", "deleted": true})
}
