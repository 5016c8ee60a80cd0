package proxy

import (
	"context"
	"errors"
	"net/http"

	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/memory"
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

// identify resolves the request's identity and mode. Without a resolver
// memory is off.
func (p *Proxy) identify(h http.Header, bodyUser string) (memory.Identity, memory.Mode, *apierr.Error) {
	if p.deps.Resolver == nil {
		return memory.Identity{}, memory.ModeOff, nil
	}
	id, mode, err := p.deps.Resolver.Resolve(h, bodyUser)
	if err != nil {
		return id, mode, apierr.FromIdentity(err)
	}
	return id, mode, nil
}

// prepareResult is one Prepare call's outcome.
type prepareResult struct {
	p   memory.Prepared
	err error
}

// prepareWithin calls Prepare under LoadTimeout and stops waiting when the
// deadline passes even if Prepare ignores its context.
func (p *Proxy) prepareWithin(ctx context.Context, req memory.Request) (memory.Prepared, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.LoadTimeout)
	defer cancel()
	done := make(chan prepareResult, 1)
	go func() {
		prep, err := p.deps.Preparer.Prepare(ctx, req)
		done <- prepareResult{prep, err}
	}()
	select {
	case r := <-done:
		if r.err == nil && len(r.p.Messages) == 0 {
			r.err = errors.New("prepare returned no messages")
		}
		if r.err == nil {
			p.m.tokensSent.Add(float64(r.p.TokensSent))
			p.m.tokensSaved.Add(float64(max(0, r.p.TokensOriginal-r.p.TokensSent)))
		}
		return r.p, r.err
	case <-ctx.Done():
		return memory.Prepared{}, ctx.Err()
	}
}
