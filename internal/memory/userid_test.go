package memory

import (
	"strings"
	"testing"
)

// TestBodyUserID: a body's user value that is an id names that user; any
// other names "u-" and a digest of it — an id, the same on every call and
// release (a change would split every such user's memory in two), and
// different for different values, case and spaces included.
func TestBodyUserID(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		// A blank value names no one, as an empty one: an app that
		// sends " " for each anonymous user (first+" "+last, both empty)
		// must not give them all one memory.
		{" ", ""},
		{"\t \n", ""},
		{"\u00a0\u3000", ""},
		{"alice", "alice"},
		{"ann+chat@example.com", "ann+chat@example.com"},
		{strings.Repeat("a", 128), strings.Repeat("a", 128)},
		// The documented rule, pinned: sha256 of the value, 32 hex digits.
		{"John Smith", "u-ef61a579c907bbed674c0dbcbcf7f7af"},
		{"{3F2504E0-4F89-11D3-9A0C-0305E82C3301}", "u-958f2d2050c3dadede3aac3003189789"},
		// A digest's form is reserved: sent as a body's value (a username
		// an end user chose), it names a user of its own, not the user
		// whose value has that digest.
		{"u-ef61a579c907bbed674c0dbcbcf7f7af", "u-2c349ae42f7ee3fca27b9da25c490b51"},
		// Other ids starting "u-" are ids.
		{"u-ef61a579", "u-ef61a579"},
		{"u-EF61A579C907BBED674C0DBCBCF7F7AF", "u-EF61A579C907BBED674C0DBCBCF7F7AF"},
	} {
		if got := BodyUserID(tc.in); got != tc.want {
			t.Errorf("BodyUserID(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	seen := map[string]string{}
	for _, v := range []string{"John Smith", "john smith", "John Smith ", " John Smith", "aGk/+w==", "a b", "ünïcode", strings.Repeat("a", 129)} {
		id := BodyUserID(v)
		if !ValidID(id) {
			t.Errorf("BodyUserID(%q) = %q, not an id", v, id)
		}
		if id != BodyUserID(v) {
			t.Errorf("BodyUserID(%q) differs between calls", v)
		}
		if BodyUserID(id) == id {
			t.Errorf("BodyUserID(%q) = %q, which a body may send to name the same user", v, id)
		}
		if !IsDigestUser(id) {
			t.Errorf("IsDigestUser(BodyUserID(%q) = %q) = false", v, id)
		}
		if other, ok := seen[id]; ok {
			t.Errorf("BodyUserID(%q) = BodyUserID(%q) = %q", v, other, id)
		}
		seen[id] = v
	}
}
