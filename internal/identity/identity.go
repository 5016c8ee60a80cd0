// Package identity decides whose memory a request uses: it checks the gateway API
// key (when keys are configured), picks the tenant, and reads the user,
// conversation and memory mode from the X-Memory-* headers.
package identity

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/memgate/memgate/internal/memory"
)

// The identity headers (a public contract).
const (
	HeaderUser         = "X-Memory-User"
	HeaderConversation = "X-Memory-Conversation"
	HeaderTenant       = "X-Memory-Tenant"
	HeaderMode         = "X-Memory-Mode"
)

// Errors Resolve returns for a bad or missing gateway key.
var (
	// ErrUnauthorized reports a missing or unknown gateway key (HTTP 401).
	ErrUnauthorized = errors.New("missing or invalid gateway API key")
	// ErrNoKey is the ErrUnauthorized of a request that presented no
	// bearer key at all (a CORS preflight never carries one): it guessed
	// nothing, so it is not a refused key (see Refused).
	ErrNoKey = fmt.Errorf("%w: no key presented", ErrUnauthorized)
	// ErrForbidden reports a key choosing a tenant it may not act for (HTTP 403).
	ErrForbidden = errors.New("this key may not choose another tenant")
)

// HeaderError reports a malformed identity header. It wraps
// memory.ErrInvalid.
type HeaderError struct {
	// Header is the offending header's name.
	Header string
	// Err is the reason, wrapping memory.ErrInvalid.
	Err error
}

// Error names the header.
func (e *HeaderError) Error() string {
	return fmt.Sprintf("invalid header %s: %v", e.Header, e.Err)
}

// The reasons of a malformed id header and mode header: they say what a
// valid value is.
var (
	errNotID   = fmt.Errorf("%w (an id is %s)", memory.ErrInvalid, memory.IDChars)
	errNotMode = fmt.Errorf("%w (the modes are on, off, read or write)", memory.ErrInvalid)
)

// Unwrap returns Err.
func (e *HeaderError) Unwrap() error { return e.Err }

// HeaderName returns the offending header's name.
func (e *HeaderError) HeaderName() string { return e.Header }

// Key is one gateway key a Resolver accepts (keys[] in the
// configuration).
type Key struct {
	// Hash is "sha256:<hex>" of the key (see HashKey).
	Hash string
	// Tenant is the tenant the key acts for.
	Tenant string
	// ChooseTenant lets the key pick another tenant with X-Memory-Tenant.
	ChooseTenant bool
}

// key is one configured gateway key, by the raw bytes of its hash.
type key struct {
	hash         [sha256.Size]byte
	tenant       string
	chooseTenant bool
}

// Resolver resolves request identities. Its zero value has no keys.
type Resolver struct {
	keys []key
	// admin is the sha256 of the admin key, nil without one.
	admin *[sha256.Size]byte
	// adminUnusable: the configured admin hash is malformed; no key
	// matches it.
	adminUnusable bool
}

// New returns a Resolver for the configured keys. Entries whose hash is not
// "sha256:<64 hex digits>" are skipped (the configuration's validation
// rejects them first).
func New(keys []Key) *Resolver {
	r := &Resolver{}
	for _, k := range keys {
		h, ok := parseHash(k.Hash)
		if !ok {
			continue
		}
		r.keys = append(r.keys, key{hash: h, tenant: k.Tenant, chooseTenant: k.ChooseTenant})
	}
	return r
}

// HashKey returns the configuration form of a gateway key: "sha256:<hex>".
func HashKey(k string) string {
	sum := sha256.Sum256([]byte(k))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// parseHash decodes "sha256:<hex>".
func parseHash(s string) ([sha256.Size]byte, bool) {
	var h [sha256.Size]byte
	hexPart, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(hexPart) != 2*sha256.Size {
		return h, false
	}
	if _, err := hex.Decode(h[:], []byte(strings.ToLower(hexPart))); err != nil {
		return h, false
	}
	return h, true
}

// RequireKey reports whether requests must present a gateway key, in which
// case the upstream key comes from configuration, not from the client.
func (r *Resolver) RequireKey() bool { return len(r.keys) > 0 }

// Resolve reads a request's identity and memory mode.
//
// The user is X-Memory-User, else the one bodyUser names (the body's user
// value, memory.BodyUserID: itself when an id, else a digest of it); an
// empty user means memory is off for the request, which Resolve leaves to the
// caller to act on. The headers' ids must satisfy memory.ValidID, and each
// header may be given once (single); a bad one yields a *HeaderError
// naming it. With
// keys configured, "Authorization: Bearer <key>"
// must name one of them (ErrUnauthorized otherwise) and the tenant is the
// key's; an X-Memory-Tenant naming another tenant is ErrForbidden unless the
// key may choose its tenant. Without keys the tenant is X-Memory-Tenant or
// memory.DefaultTenant.
func (r *Resolver) Resolve(h http.Header, bodyUser string) (memory.Identity, memory.Mode, error) {
	var id memory.Identity
	var k key
	if r.RequireKey() {
		var ok bool
		if k, ok = r.match(h.Get("Authorization")); !ok {
			return id, "", unauthorized(h)
		}
	}
	tenantHeader, err := idHeader(h, HeaderTenant)
	if err != nil {
		return id, "", err
	}
	if r.RequireKey() {
		id.Tenant = k.tenant
		if tenantHeader != "" && tenantHeader != k.tenant {
			if !k.chooseTenant {
				return memory.Identity{}, "", ErrForbidden
			}
			id.Tenant = tenantHeader
		}
	} else {
		id.Tenant = tenantHeader
		if id.Tenant == "" {
			id.Tenant = memory.DefaultTenant
		}
	}

	if id.User, err = idHeader(h, HeaderUser); err != nil {
		return memory.Identity{}, "", err
	}
	id = WithBodyUser(id, bodyUser)
	if id.Conversation, err = idHeader(h, HeaderConversation); err != nil {
		return memory.Identity{}, "", err
	}
	m, err := single(h, HeaderMode)
	if err != nil {
		return memory.Identity{}, "", err
	}
	mode, err := memory.ParseMode(strings.ToLower(strings.TrimSpace(m)))
	if err != nil {
		return memory.Identity{}, "", &HeaderError{Header: HeaderMode, Err: errNotMode}
	}
	return id, mode, nil
}

// WithBodyUser returns id, resolved from headers alone (Resolve with
// bodyUser ""), as Resolve resolves it with bodyUser: when no header named
// the user, the one bodyUser names (memory.BodyUserID). So a route that
// checks the headers (the gateway key) before it reads the body resolves
// them once.
func WithBodyUser(id memory.Identity, bodyUser string) memory.Identity {
	if id.User == "" {
		id.User = memory.BodyUserID(bodyUser)
	}
	return id
}

// single returns the one value of the header name in h ("" when absent).
// A header given more than once is a *HeaderError naming it: which value
// counts would depend on who reads it, and a proxy in front that appends
// the identity it authenticated after the client's own would lose to the
// client. That covers its case forms (net/http files x-memory-user under
// X-Memory-User) and one line of comma-joined values, the form a proxy may
// give a repeated header (RFC 9110, section 5.3): no identity header's
// value holds a comma.
func single(h http.Header, name string) (string, error) {
	vs := h.Values(name)
	switch {
	case len(vs) > 1:
		return "", &HeaderError{Header: name, Err: fmt.Errorf("%w: given more than once (%d times)", memory.ErrInvalid, len(vs))}
	case len(vs) == 0:
		return "", nil
	case strings.Contains(vs[0], ","):
		return "", &HeaderError{Header: name, Err: fmt.Errorf("%w: given more than once (a comma-separated list)", memory.ErrInvalid)}
	}
	return vs[0], nil
}

// idHeader returns the id the header name gives: its single value, which
// must be an id (memory.ValidID), or "" when it is absent or empty.
// Anything else is a *HeaderError naming it.
func idHeader(h http.Header, name string) (string, error) {
	v, err := single(h, name)
	if err != nil || v == "" {
		return "", err
	}
	if !memory.ValidID(v) {
		return "", &HeaderError{Header: name, Err: errNotID}
	}
	return v, nil
}

// match finds the key an Authorization header presents. Every configured key
// is compared, in constant time, so timing reveals nothing about which
// prefix matched.
func (r *Resolver) match(authorization string) (key, bool) {
	token, ok := bearer(authorization)
	if !ok {
		return key{}, false
	}
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range r.keys {
		if subtle.ConstantTimeCompare(sum[:], r.keys[i].hash[:]) == 1 && found < 0 {
			found = i
		}
	}
	if found < 0 {
		return key{}, false
	}
	return r.keys[found], true
}

// unauthorized is the error of a request whose Authorization no key
// matches: ErrNoKey when it presents no bearer key, else ErrUnauthorized.
func unauthorized(h http.Header) error {
	if _, ok := bearer(h.Get("Authorization")); !ok {
		return ErrNoKey
	}
	return ErrUnauthorized
}

// Refused reports whether err refuses a key the request presented (a
// wrong gateway or admin key): what the failed-key limiter counts. A
// request that presented none is not refused a key.
func Refused(err error) bool {
	return errors.Is(err, ErrUnauthorized) && !errors.Is(err, ErrNoKey)
}

// bearer returns the token of "Bearer <token>".
func bearer(authorization string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(authorization), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
