package mcpserver

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/server"
)

// IdentityResolver decides who may use the memory and for which tenant:
// the management API's key rule (implemented by internal/identity).
type IdentityResolver interface {
	// ResolveAdmin returns the caller's tenant, or why it may not call;
	// remoteAddr is the TCP peer.
	ResolveAdmin(h http.Header, remoteAddr string) (string, error)
}

// tenantKey carries the tenant the key rule decided on.
type tenantKey struct{}

// Handler returns the streamable HTTP endpoint (MCP's "Streamable HTTP"
// transport, stateless: every POST is answered on its own, so no session
// outlives the credentials it was opened with). Each request is let through
// exactly as the management API's are: the admin key opens every tenant
// (X-Memory-Tenant, else the default), a gateway key its own, and with no
// key configured only loopback peers get in; the others get 401 or 403 in
// OpenAI's error shape and no server is made (a refused key is marked on
// the request's server.Exchange for the failed-key limiter). The caller
// puts the browser protections (Host, Origin, Content-Type) in front of
// it; maxBody caps a request body, which must arrive within
// apierr.BodyReadTimeout.
func (s *Service) Handler(resolver IdentityResolver, maxBody int64) http.Handler {
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		tenant, ok := r.Context().Value(tenantKey{}).(string)
		if !ok {
			return nil
		}
		return s.Server(tenant)
	}, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		JSONResponse:        true,
		Logger:              s.log,
		MaxRequestBodyBytes: maxBody,
		// The gateway's browser guard checks the Host (the allow-listed
		// names included) before this handler runs, as on every route no
		// key protects; the SDK's own check would refuse a reverse proxy's
		// allow-listed name on a loopback listener.
		DisableLocalhostProtection: true,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant, err := resolver.ResolveAdmin(r.Header, r.RemoteAddr)
		if err != nil {
			aerr := identity.APIError(err)
			if identity.Refused(err) {
				// Counted by the failed-key limiter in front, as on the
				// management API.
				server.ExchangeOf(r.Context()).AuthFailed()
			}
			apierr.Write(w, aerr)
			return
		}
		// The body is read here, as every body the gateway reads: up to
		// maxBody within apierr.BodyReadTimeout. The SDK would read it
		// with no deadline, and a deadline left on the connection while
		// a tool runs would end its request.
		body, aerr := apierr.ReadBody(w, r, maxBody)
		if aerr != nil {
			apierr.Write(w, aerr)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenant)))
	})
}
