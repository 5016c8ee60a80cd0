package identity

import (
	"errors"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// lookalikes of "alice": a zero-width space, fullwidth letters, a Cyrillic
// "а", a right-to-left override, a NUL, a tab, another case, a trailing
// space.
var lookalikes = []string{"alice\u200b", "\uFF41\uFF4C\uFF49\uFF43\uFF45", "\u0430lice", "\u202Ealice", "alice\x00", "alice\t", "Alice", "alice "}

// TestLookalikeIdentityHeadersRefused: an identity header whose value only
// looks like an id (invisible, fullwidth, other-script or control
// characters) is refused, never normalised into the id it looks like, so
// no header value aliases another user, tenant or conversation.
func TestLookalikeIdentityHeadersRefused(t *testing.T) {
	r := New(nil)
	for _, name := range []string{HeaderUser, HeaderTenant, HeaderConversation} {
		for _, v := range lookalikes {
			if v == "Alice" {
				continue // an id: a user of its own (TestLookalikeBodyUsersNeverAlias)
			}
			_, _, err := r.Resolve(headers(name, v), "")
			var he *HeaderError
			if !errors.As(err, &he) || he.HeaderName() != name || !errors.Is(err, memory.ErrInvalid) {
				t.Errorf("%s: %q resolved (err %v), want a HeaderError naming it", name, v, err)
			}
		}
	}
}

// TestLookalikeBodyUsersNeverAlias: body user values that look alike —
// "alice" and each of its lookalikes — name as many users, none of them
// "alice" but "alice" itself.
func TestLookalikeBodyUsersNeverAlias(t *testing.T) {
	r := New(nil)
	seen := map[string]string{}
	for _, v := range append([]string{"alice"}, lookalikes...) {
		id, _, err := r.Resolve(headers(), v)
		if err != nil {
			t.Fatalf("body user %q: %v", v, err)
		}
		if id.User == "" || !memory.ValidID(id.User) {
			t.Fatalf("body user %q resolved to %q, want a valid id", v, id.User)
		}
		if other, ok := seen[id.User]; ok {
			t.Errorf("body users %q and %q share the memory user %q", other, v, id.User)
		}
		seen[id.User] = v
	}
}
