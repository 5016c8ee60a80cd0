package ui

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/identity"
)

func TestKeyGuard(t *testing.T) {
	gatewayKeys := identity.New([]identity.Key{
		{Hash: identity.HashKey("sk-acme"), Tenant: "acme"},
		{Hash: identity.HashKey("sk-ops"), Tenant: "ops", ChooseTenant: true},
	})
	local, remote := "127.0.0.1:50000", "203.0.113.9:50000"
	tests := []struct {
		name        string
		guard       Guard
		remote      string
		key, tenant string
		want        string
		wantErr     error
	}{
		{"admin key, any tenant", KeyGuard(gatewayKeys, identity.HashKey(adminKey)), remote, adminKey, "beta", "beta", nil},
		{"admin key, default tenant", KeyGuard(gatewayKeys, identity.HashKey(adminKey)), remote, adminKey, "", "default", nil},
		{"admin only, wrong key", KeyGuard(identity.New(nil), identity.HashKey(adminKey)), local, "sk-nope", "", "", ErrDenied},
		{"admin only, no key even on loopback", KeyGuard(identity.New(nil), identity.HashKey(adminKey)), local, "", "", "", ErrDenied},
		{"gateway key, own tenant", KeyGuard(gatewayKeys, ""), remote, "sk-acme", "", "acme", nil},
		{"gateway key, naming its tenant", KeyGuard(gatewayKeys, ""), remote, "sk-acme", "acme", "acme", nil},
		{"gateway key, another tenant", KeyGuard(gatewayKeys, ""), remote, "sk-acme", "beta", "", ErrTenant},
		{"choose-tenant key", KeyGuard(gatewayKeys, ""), remote, "sk-ops", "beta", "beta", nil},
		{"unknown key", KeyGuard(gatewayKeys, identity.HashKey(adminKey)), local, "sk-nope", "", "", ErrDenied},
		{"no key with gateway keys", KeyGuard(gatewayKeys, ""), local, "", "", "", ErrDenied},
		{"nothing configured, loopback", KeyGuard(identity.New(nil), ""), local, "", "beta", "beta", nil},
		{"nothing configured, IPv6 loopback", KeyGuard(identity.New(nil), ""), "[::1]:5000", "anything", "", "default", nil},
		{"nothing configured, remote", KeyGuard(identity.New(nil), ""), remote, "", "", "", ErrDenied},
		{"bad tenant id", KeyGuard(identity.New(nil), ""), local, "", "a/b", "", ErrTenant},
		// Finding 9: a hash that is not hex read as "no key configured".
		{"non-hex admin hash, loopback", KeyGuard(identity.New(nil), "sha256:"+strings.Repeat("zz", 32)), local, "", "", "", ErrDenied},
		{"short admin hash, loopback", KeyGuard(identity.New(nil), "sha256:abc"), local, "anything", "", "", ErrDenied},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := http.NewRequest("GET", "/ui/users", nil)
			r.RemoteAddr = tt.remote
			got, err := tt.guard(r, tt.key, tt.tenant)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Errorf("guard = %q, %v; want %q, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"/ui/users/alice?tenant=acme": "/ui/users/alice?tenant=acme",
		"/ui?tenant=x":                "/ui?tenant=x",
		"//evil.example/ui":           "/ui/users",
		"https://evil.example/ui":     "/ui/users",
		"/uix":                        "/ui/users",
		"/v1/memory/conversations":    "/ui/users",
		"":                            "/ui/users",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAnotherTenantsKeySeesNothing(t *testing.T) {
	st := mustStore(t) // alice lives in tenant acme
	guard := KeyGuard(identity.New([]identity.Key{{Hash: identity.HashKey("sk-beta"), Tenant: "beta"}}), "")
	base := mustUI(t, st, guard)
	c := browser(t)
	login(t, c, base, "sk-beta")
	resp, body := do(t, c, "GET", base+"/ui/users/alice/conversations/trip?tenant=acme", nil)
	if resp.StatusCode != http.StatusForbidden || contains(body, secret) {
		t.Errorf("other tenant's conversation: status %d", resp.StatusCode)
	}
	resp, body = do(t, c, "GET", base+"/ui/users.json?tenant=acme", nil)
	if resp.StatusCode != http.StatusForbidden || contains(body, "alice") {
		t.Errorf("other tenant's users.json: status %d body %s", resp.StatusCode, body)
	}
	// Its own tenant has no alice.
	resp, body = do(t, c, "GET", base+"/ui/users/alice/conversations/trip", nil)
	if resp.StatusCode != http.StatusNotFound || contains(body, secret) {
		t.Errorf("own tenant: status %d", resp.StatusCode)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
