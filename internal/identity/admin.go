package identity

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"strings"

	"github.com/memgate/memgate/internal/memory"
)

// ErrLoopbackOnly reports a management call from another host to a gateway
// that has no key configured (HTTP 403): with neither gateway keys nor an
// admin key, the management API answers loopback clients only.
var ErrLoopbackOnly = errors.New("the management API answers loopback clients only until admin_key or keys are configured")

// NewWithAdmin returns a Resolver for the configured gateway keys and the
// admin key (the key itself, or "sha256:<hex>" of it; "" for none). A value
// that starts with "sha256:" but is not 64 hex digits (config.Validate
// rejects it first) is an admin key no key matches: the management API
// stays closed rather than open as if none were configured.
func NewWithAdmin(keys []Key, adminKey string) *Resolver {
	r := New(keys)
	if adminKey == "" {
		return r
	}
	h, ok := parseHash(adminKey)
	switch {
	case ok:
	case strings.HasPrefix(adminKey, "sha256:"):
		r.adminUnusable = true
	default:
		h = sha256.Sum256([]byte(adminKey))
	}
	r.admin = &h
	return r
}

// ResolveAdmin decides whether a management API call may proceed, and for
// which tenant. remoteAddr is the TCP peer (http.Request.RemoteAddr), never
// a forwarded-for header.
//
//   - The admin key opens every tenant: the tenant is X-Memory-Tenant, else
//     memory.DefaultTenant.
//   - A gateway key opens its own tenant, as for /v1 (X-Memory-Tenant only
//     with choose_tenant).
//   - With keys configured, anything else is ErrUnauthorized.
//   - With no key configured at all, loopback peers act as in Resolve
//     without keys; any other peer gets ErrLoopbackOnly.
func (r *Resolver) ResolveAdmin(h http.Header, remoteAddr string) (string, error) {
	if r.admin != nil && r.matchAdmin(h.Get("Authorization")) {
		t, err := idHeader(h, HeaderTenant)
		if err != nil {
			return "", err
		}
		if t == "" {
			return memory.DefaultTenant, nil
		}
		return t, nil
	}
	if r.RequireKey() {
		id, _, err := r.Resolve(tenantOnly(h), "")
		return id.Tenant, err
	}
	if r.admin != nil {
		return "", unauthorized(h)
	}
	if !IsLoopback(remoteAddr) {
		return "", ErrLoopbackOnly
	}
	id, _, err := r.Resolve(tenantOnly(h), "")
	return id.Tenant, err
}

// ResolveFor reads the user, conversation and mode of a request as Resolve
// does, for a tenant ResolveAdmin already decided.
func (r *Resolver) ResolveFor(tenant string, h http.Header, bodyUser string) (memory.Identity, memory.Mode, error) {
	hh := h.Clone()
	hh.Del(HeaderTenant)
	id, mode, err := (&Resolver{}).Resolve(hh, bodyUser)
	id.Tenant = tenant
	return id, mode, err
}

// tenantOnly returns h without the headers that address memory, which the
// management API takes from its URL.
func tenantOnly(h http.Header) http.Header {
	hh := h.Clone()
	hh.Del(HeaderUser)
	hh.Del(HeaderConversation)
	hh.Del(HeaderMode)
	return hh
}

// matchAdmin reports whether an Authorization header presents the admin key.
func (r *Resolver) matchAdmin(authorization string) bool {
	token, ok := bearer(authorization)
	if !ok || r.adminUnusable {
		return false
	}
	sum := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(sum[:], r.admin[:]) == 1
}

// IsLoopback reports whether a TCP peer address ("host:port") is a loopback
// address.
func IsLoopback(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// AdminKeyHash returns the admin key as configured (the key itself, or
// "sha256:<hex>" of it) in its hashed form, "sha256:<hex>"; "" for none.
func AdminKeyHash(adminKey string) string {
	if adminKey == "" || strings.HasPrefix(adminKey, "sha256:") {
		return adminKey
	}
	return HashKey(adminKey)
}

// MatchKeys returns a check of whether an Authorization header presents one
// of keys ("Bearer <key>"), each configured as the key itself or
// "sha256:<hex>" of it; "" and malformed hashes match nothing. Every key is
// compared in constant time.
func MatchKeys(keys ...string) func(authorization string) bool {
	var sums [][sha256.Size]byte
	for _, k := range keys {
		h, ok := parseHash(k)
		switch {
		case ok:
		case k == "" || strings.HasPrefix(k, "sha256:"):
			continue
		default:
			h = sha256.Sum256([]byte(k))
		}
		sums = append(sums, h)
	}
	return func(authorization string) bool {
		token, ok := bearer(authorization)
		if !ok {
			return false
		}
		sum := sha256.Sum256([]byte(token))
		found := false
		for i := range sums {
			if subtle.ConstantTimeCompare(sum[:], sums[i][:]) == 1 {
				found = true
			}
		}
		return found
	}
}
