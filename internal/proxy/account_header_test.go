package proxy

import (
	"testing"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestClientAccountHeadersWithTheSharedKey: with the operator's key in
// use, a tenant's OpenAI-Organization and OpenAI-Project would choose
// which of the operator's organizations and projects a request bills and
// reads; they never go upstream. A client calling with its own key keeps
// them: the account is its own. A browser's cookies (every app on the
// loopback host shares them) never go to the provider.
func TestClientAccountHeadersWithTheSharedKey(t *testing.T) {
	keyed := identity.New([]identity.Key{{Hash: identity.HashKey("gw-key"), Tenant: "acme"}})
	tests := []struct {
		name     string
		apiKey   string
		resolver *identity.Resolver
		auth     string
		account  bool // the account headers reach the upstream
	}{
		{"shared key, gateway keys", "sk-operator", keyed, "Bearer gw-key", false},
		{"shared key, open gateway", "sk-operator", identity.New(nil), "Bearer whatever", false},
		{"client's own key", "", identity.New(nil), "Bearer sk-client", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := upstreamtest.New(t, nil)
			g := mustGateway(t, up, func(c *gatewayConfig) { c.Upstream.APIKey = tt.apiKey }, Deps{Resolver: tt.resolver})
			for _, path := range []string{"/v1/chat/completions", "/v1/embeddings"} {
				resp, b := g.post(t, path, simpleChat, map[string]string{
					"Authorization":       tt.auth,
					"OpenAI-Organization": "org-other",
					"OpenAI-Project":      "proj_other",
					"Cookie":              "session=local-app-secret",
				})
				if resp.StatusCode != 200 {
					t.Fatalf("%s: status %d: %s", path, resp.StatusCode, b)
				}
				h := up.Last(t).Header
				if got := h.Get("Cookie"); got != "" {
					t.Errorf("%s: upstream got Cookie %q", path, got)
				}
				for _, k := range []string{"OpenAI-Organization", "OpenAI-Project"} {
					if got := h.Get(k) != ""; got != tt.account {
						t.Errorf("%s: upstream got %s: %v, want %v", path, k, got, tt.account)
					}
				}
			}
		})
	}
}
