package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/memgate/memgate/internal/auth"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/wirehdr"
)

// Preparer rewrites the message list of a memory-on chat request
// (implemented by internal/inject).
type Preparer interface {
	Prepare(ctx context.Context, req memory.Request) (memory.Prepared, error)
}

// Capturer takes a finished exchange; it must not block (implemented by
// internal/capture).
type Capturer interface {
	Capture(ctx context.Context, ex memory.Exchange)
}

// IdentityResolver maps a request to its identity and memory mode
// (implemented by internal/auth). RequireKey reports whether gateway keys are
// configured, in which case every /v1 route checks them and the client's
// Authorization never goes upstream.
type IdentityResolver interface {
	Resolve(h http.Header, bodyUser string) (memory.Identity, memory.Mode, error)
	RequireKey() bool
}

// headerNamer is implemented by resolver errors that blame one header.
type headerNamer interface{ HeaderName() string }

// requireKey reports whether gateway keys guard the /v1 routes.
func (s *Server) requireKey() bool { return s.deps.Resolver != nil && s.deps.Resolver.RequireKey() }

// identify resolves the request's identity and mode. Without a resolver
// memory is off.
func (s *Server) identify(h http.Header, bodyUser string) (memory.Identity, memory.Mode, *apiError) {
	if s.deps.Resolver == nil {
		return memory.Identity{}, memory.ModeOff, nil
	}
	id, mode, err := s.deps.Resolver.Resolve(h, bodyUser)
	if err != nil {
		return id, mode, identityError(err)
	}
	return id, mode, nil
}

// identityError translates a resolver error: 401, 403, or 400 naming the
// offending header.
func identityError(err error) *apiError {
	switch {
	case errors.Is(err, auth.ErrUnauthorized):
		return &apiError{Status: http.StatusUnauthorized, Type: typeAuthentication, Code: "invalid_api_key",
			Message: "A valid gateway key is required: Authorization: Bearer <key>."}
	case errors.Is(err, auth.ErrForbidden):
		return &apiError{Status: http.StatusForbidden, Type: typePermission, Code: "tenant_forbidden",
			Message: "This key may not act for the requested tenant."}
	}
	param := ""
	var hn headerNamer
	if errors.As(err, &hn) {
		param = hn.HeaderName()
	}
	return invalid(param, err.Error())
}

// parseMessages reads every message with memory.ParseMessage.
func parseMessages(raw []json.RawMessage) ([]memory.Message, *apiError) {
	out := make([]memory.Message, len(raw))
	for i, m := range raw {
		p, err := memory.ParseMessage(m)
		if err != nil {
			return nil, invalid("messages["+strconv.Itoa(i)+"]", err.Error())
		}
		out[i] = p
	}
	return out, nil
}

// memoryRequest builds what the memory layer is asked, reading
// X-Memory-Budget (a whole number ≥ 1) and X-Memory-Cross (off disables
// cross-conversation recall).
func memoryRequest(h http.Header, id memory.Identity, mode memory.Mode, b *chatBody, parsed []memory.Message) (memory.Request, *apiError) {
	req := memory.Request{
		Identity:          id,
		Mode:              mode,
		Model:             b.model,
		Messages:          b.messages,
		Parsed:            parsed,
		MaxTokens:         b.maxTokens,
		CrossConversation: !strings.EqualFold(strings.TrimSpace(wirehdr.Value(h, "X-Memory-Cross")), "off"),
	}
	if v := wirehdr.Value(h, "X-Memory-Budget"); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 {
			return req, invalid("X-Memory-Budget", "X-Memory-Budget must be a whole number of tokens, at least 1.")
		}
		req.Budget = n
	}
	return req, nil
}

// prepareResult is one Prepare call's outcome.
type prepareResult struct {
	p   memory.Prepared
	err error
}

// prepareWithin calls Prepare under LoadTimeout and stops waiting when the
// deadline passes even if Prepare ignores its context.
func (s *Server) prepareWithin(ctx context.Context, req memory.Request) (memory.Prepared, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Memory.LoadTimeout.D())
	defer cancel()
	done := make(chan prepareResult, 1)
	go func() {
		p, err := s.deps.Preparer.Prepare(ctx, req)
		done <- prepareResult{p, err}
	}()
	select {
	case r := <-done:
		if r.err == nil && len(r.p.Messages) == 0 {
			r.err = errors.New("prepare returned no messages")
		}
		if r.err == nil {
			s.m.tokensSent.Add(float64(r.p.TokensSent))
			s.m.tokensSaved.Add(float64(max(0, r.p.TokensOriginal-r.p.TokensSent)))
		}
		return r.p, r.err
	case <-ctx.Done():
		return memory.Prepared{}, ctx.Err()
	}
}

// captureExchange hands a completed exchange to the Capturer, detached from
// the client's context so a hang-up never loses the turn.
func (s *Server) captureExchange(ctx context.Context, x *exchange, id memory.Identity, model string, parsed []memory.Message, reply memory.Message, usage *memory.Usage) {
	nonSystem := make([]memory.Message, 0, len(parsed))
	for _, m := range parsed {
		if !memory.IsSystem(m.Role) {
			nonSystem = append(nonSystem, m)
		}
	}
	prior, turn := memory.SplitTurn(nonSystem)
	s.deps.Capturer.Capture(context.WithoutCancel(ctx), memory.Exchange{
		ID:       x.id,
		Identity: id,
		Model:    model,
		Prior:    prior,
		Turn:     turn,
		Reply:    reply,
		Usage:    usage,
		At:       time.Now(),
	})
}
