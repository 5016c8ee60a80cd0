package ui

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"strings"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
)

// Errors a Guard returns.
var (
	// ErrDenied reports a missing or wrong key, or a client the no-key rule
	// does not let in.
	ErrDenied = errors.New("ui: access denied")
	// ErrTenant reports a key asking for a tenant it may not inspect.
	ErrTenant = errors.New("ui: this key may not inspect that tenant")
)

// Guard decides whether the operator of r, presenting key ("" for none),
// may inspect tenant ("" for the key's own tenant, or the default), and
// returns the tenant to show. It is called on every inspector request.
type Guard func(r *http.Request, key, tenant string) (string, error)

// KeyResolver is what KeyGuard needs of internal/identity's Resolver.
type KeyResolver interface {
	Resolve(h http.Header, bodyUser string) (memory.Identity, memory.Mode, error)
	RequireKey() bool
}

// KeyGuard is the management API's key rule:
//   - the admin key (adminHash is its "sha256:<hex>", empty for none) may
//     inspect every tenant;
//   - a gateway key inspects its own tenant, or another when it may choose
//     its tenant (checked by res exactly as for /v1/memory);
//   - with no key configured at all, only loopback clients are let in, on
//     any tenant, whatever key they present.
//
// An adminHash that is set but not "sha256:" and 64 hex digits lets no one
// in: a mistyped hash never reads as "no key configured".
func KeyGuard(res KeyResolver, adminHash string) Guard {
	var admin []byte
	if h, ok := strings.CutPrefix(adminHash, "sha256:"); ok {
		admin, _ = hex.DecodeString(strings.ToLower(h))
	}
	if adminHash != "" && len(admin) != sha256.Size {
		return func(*http.Request, string, string) (string, error) { return "", ErrDenied }
	}
	return func(r *http.Request, key, tenant string) (string, error) {
		if tenant != "" && !memory.ValidID(tenant) {
			return "", ErrTenant
		}
		if len(admin) == sha256.Size && key != "" {
			sum := sha256.Sum256([]byte(key))
			if subtle.ConstantTimeCompare(sum[:], admin) == 1 {
				return orDefault(tenant), nil
			}
		}
		if res != nil && res.RequireKey() {
			if key == "" {
				return "", ErrDenied
			}
			h := http.Header{}
			h.Set("Authorization", "Bearer "+key)
			if tenant != "" {
				h.Set(identity.HeaderTenant, tenant)
			}
			id, _, err := res.Resolve(h, "")
			switch {
			case errors.Is(err, identity.ErrForbidden):
				return "", ErrTenant
			case err != nil:
				return "", ErrDenied
			}
			return id.Tenant, nil
		}
		if len(admin) == sha256.Size {
			// Only the admin key is configured, and this was not it.
			return "", ErrDenied
		}
		if !loopback(r.RemoteAddr) {
			return "", ErrDenied
		}
		return orDefault(tenant), nil
	}
}

// orDefault returns tenant, or memory.DefaultTenant for "".
func orDefault(tenant string) string {
	if tenant == "" {
		return memory.DefaultTenant
	}
	return tenant
}

// loopback reports whether a RemoteAddr is a loopback address.
func loopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
