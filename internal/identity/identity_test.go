package identity

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/memory"
)

func headers(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func TestHashKey(t *testing.T) {
	// sha256("abc") is a published test vector.
	const want = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got := HashKey("abc"); got != want {
		t.Fatalf("HashKey(abc) = %s, want %s", got, want)
	}
	if err := (config.Config{Keys: []config.Key{{Hash: HashKey("x"), Tenant: "t"}}}).Validate(); err != nil &&
		strings.Contains(err.Error(), "keys[0].hash") {
		t.Fatalf("config rejects HashKey output: %v", err)
	}
}

func TestResolveWithoutKeys(t *testing.T) {
	r := New(nil)
	if r.RequireKey() {
		t.Fatal("RequireKey with no keys")
	}
	long := strings.Repeat("a", 129)
	tests := []struct {
		name       string
		h          http.Header
		bodyUser   string
		want       memory.Identity
		wantMode   memory.Mode
		wantHeader string // non-empty: a HeaderError naming it
	}{
		{name: "nothing", h: headers(), want: memory.Identity{Tenant: "default"}, wantMode: memory.ModeOn},
		{name: "all headers", h: headers(HeaderUser, "u-1", HeaderConversation, "c:1", HeaderTenant, "acme", HeaderMode, "read"),
			want: memory.Identity{Tenant: "acme", User: "u-1", Conversation: "c:1"}, wantMode: memory.ModeRead},
		{name: "body user", h: headers(HeaderConversation, "c1"), bodyUser: "bob@example.com",
			want: memory.Identity{Tenant: "default", User: "bob@example.com", Conversation: "c1"}, wantMode: memory.ModeOn},
		{name: "body user, an e-mail address with a plus tag", bodyUser: "ann+chat@example.com", h: headers(),
			want: memory.Identity{Tenant: "default", User: "ann+chat@example.com"}, wantMode: memory.ModeOn},
		{name: "header beats body", h: headers(HeaderUser, "alice"), bodyUser: "bob",
			want: memory.Identity{Tenant: "default", User: "alice"}, wantMode: memory.ModeOn},
		{name: "invalid body user ignored when header set", h: headers(HeaderUser, "alice"), bodyUser: "not valid!",
			want: memory.Identity{Tenant: "default", User: "alice"}, wantMode: memory.ModeOn},
		{name: "modes off", h: headers(HeaderUser, "a", HeaderMode, "off"), want: memory.Identity{Tenant: "default", User: "a"}, wantMode: memory.ModeOff},
		{name: "mode write", h: headers(HeaderUser, "a", HeaderMode, "write"), want: memory.Identity{Tenant: "default", User: "a"}, wantMode: memory.ModeWrite},
		{name: "mode case-insensitive", h: headers(HeaderMode, "ON"), want: memory.Identity{Tenant: "default"}, wantMode: memory.ModeOn},
		{name: "bad mode", h: headers(HeaderMode, "sometimes"), wantHeader: HeaderMode},
		{name: "bad user", h: headers(HeaderUser, "a b"), wantHeader: HeaderUser},
		{name: "user too long", h: headers(HeaderUser, long), wantHeader: HeaderUser},
		// A body's user value that is not an id names a user of its own
		// (memory.BodyUserID), never a 400 and never no one.
		{name: "body user not an id", bodyUser: "ünïcode", h: headers(),
			want: memory.Identity{Tenant: "default", User: memory.BodyUserID("ünïcode")}, wantMode: memory.ModeOn},
		{name: "body user a name", bodyUser: "John Smith", h: headers(HeaderConversation, "c1"),
			want: memory.Identity{Tenant: "default", User: "u-ef61a579c907bbed674c0dbcbcf7f7af", Conversation: "c1"}, wantMode: memory.ModeOn},
		// A blank one names no one (memory off), as an empty one.
		{name: "body user blank", bodyUser: "  ", h: headers(HeaderConversation, "c1"),
			want: memory.Identity{Tenant: "default", Conversation: "c1"}, wantMode: memory.ModeOn},
		{name: "body user too long", bodyUser: long, h: headers(),
			want: memory.Identity{Tenant: "default", User: memory.BodyUserID(long)}, wantMode: memory.ModeOn},
		{name: "bad conversation", h: headers(HeaderUser, "a", HeaderConversation, "../etc"), wantHeader: HeaderConversation},
		{name: "bad tenant", h: headers(HeaderTenant, "a/b"), wantHeader: HeaderTenant},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id, mode, err := r.Resolve(tc.h, tc.bodyUser)
			if tc.wantHeader != "" {
				var he *HeaderError
				if !errors.As(err, &he) {
					t.Fatalf("err = %v, want *HeaderError", err)
				}
				if he.HeaderName() != tc.wantHeader || !errors.Is(err, memory.ErrInvalid) {
					t.Fatalf("HeaderError = %q (%v), want %q wrapping ErrInvalid", he.HeaderName(), err, tc.wantHeader)
				}
				if !strings.Contains(err.Error(), tc.wantHeader) {
					t.Fatalf("Error() = %q does not name %s", err.Error(), tc.wantHeader)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if id != tc.want || mode != tc.wantMode {
				t.Fatalf("Resolve = %+v %q, want %+v %q", id, mode, tc.want, tc.wantMode)
			}
		})
	}
}

func TestResolveWithKeys(t *testing.T) {
	r := New([]Key{
		{Hash: HashKey("key-acme"), Tenant: "acme"},
		{Hash: "sha256:" + strings.ToUpper(HashKey("key-admin")[7:]), Tenant: "ops", ChooseTenant: true},
		{Hash: "md5:nonsense", Tenant: "ignored"},
	})
	if !r.RequireKey() {
		t.Fatal("RequireKey = false with keys")
	}
	tests := []struct {
		name       string
		h          http.Header
		wantTenant string
		wantErr    error
		wantHeader string
	}{
		{name: "key's tenant", h: headers("Authorization", "Bearer key-acme", HeaderUser, "u"), wantTenant: "acme"},
		{name: "lowercase scheme", h: headers("Authorization", "bearer key-acme"), wantTenant: "acme"},
		{name: "same tenant header", h: headers("Authorization", "Bearer key-acme", HeaderTenant, "acme"), wantTenant: "acme"},
		{name: "other tenant forbidden", h: headers("Authorization", "Bearer key-acme", HeaderTenant, "globex"), wantErr: ErrForbidden},
		{name: "chooser picks tenant", h: headers("Authorization", "Bearer key-admin", HeaderTenant, "globex"), wantTenant: "globex"},
		{name: "chooser default tenant", h: headers("Authorization", "Bearer key-admin"), wantTenant: "ops"},
		{name: "missing key", h: headers(HeaderUser, "u"), wantErr: ErrUnauthorized},
		{name: "unknown key", h: headers("Authorization", "Bearer key-nope"), wantErr: ErrUnauthorized},
		{name: "basic scheme", h: headers("Authorization", "Basic a2V5LWFjbWU="), wantErr: ErrUnauthorized},
		{name: "empty bearer", h: headers("Authorization", "Bearer "), wantErr: ErrUnauthorized},
		{name: "hash itself is not a key", h: headers("Authorization", "Bearer "+HashKey("key-acme")), wantErr: ErrUnauthorized},
		{name: "401 before 400", h: headers(HeaderTenant, "bad tenant"), wantErr: ErrUnauthorized},
		{name: "bad tenant with key", h: headers("Authorization", "Bearer key-admin", HeaderTenant, "bad tenant"), wantHeader: HeaderTenant},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			id, _, err := r.Resolve(tc.h, "")
			switch {
			case tc.wantHeader != "":
				var he *HeaderError
				if !errors.As(err, &he) || he.Header != tc.wantHeader {
					t.Fatalf("err = %v, want HeaderError for %s", err, tc.wantHeader)
				}
			case tc.wantErr != nil:
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				if id != (memory.Identity{}) {
					t.Fatalf("identity %+v returned with error", id)
				}
			default:
				if err != nil {
					t.Fatalf("Resolve: %v", err)
				}
				if id.Tenant != tc.wantTenant {
					t.Fatalf("tenant = %q, want %q", id.Tenant, tc.wantTenant)
				}
			}
		})
	}
}

// TestMalformedAdminHashStaysClosed reproduces finding 9 at the resolver:
// "sha256:" and 64 non-hex characters must not read as "no key configured"
// (which opens the management API to loopback clients), nor match a key.
func TestMalformedAdminHashStaysClosed(t *testing.T) {
	bad := "sha256:" + strings.Repeat("zz", 32)
	r := NewWithAdmin(nil, bad)
	for _, key := range []string{"", bad, strings.Repeat("zz", 32)} {
		h := http.Header{}
		if key != "" {
			h.Set("Authorization", "Bearer "+key)
		}
		if _, err := r.ResolveAdmin(h, "127.0.0.1:5000"); !errors.Is(err, ErrUnauthorized) {
			t.Errorf("key %q from loopback: err = %v, want ErrUnauthorized", key, err)
		}
	}
	good := NewWithAdmin(nil, HashKey("adm"))
	h := http.Header{}
	h.Set("Authorization", "Bearer adm")
	if tenant, err := good.ResolveAdmin(h, "203.0.113.1:1"); err != nil || tenant != "default" {
		t.Fatalf("well-formed hash: %q, %v", tenant, err)
	}
}

// TestRefusedOnlyWhenAKeyWasPresented: a wrong bearer key is a refused key
// (the failed-key limiter counts it); a request with no bearer key at all
// is a 401 too, but refuses nothing: it guessed nothing.
func TestRefusedOnlyWhenAKeyWasPresented(t *testing.T) {
	keys := []Key{{Hash: HashKey("good"), Tenant: "a"}}
	resolvers := map[string]func(h http.Header) error{
		"Resolve with keys": func(h http.Header) error { _, _, err := New(keys).Resolve(h, ""); return err },
		"ResolveAdmin with keys": func(h http.Header) error {
			_, err := NewWithAdmin(keys, "adm").ResolveAdmin(h, "203.0.113.1:1")
			return err
		},
		"ResolveAdmin, admin key only": func(h http.Header) error {
			_, err := NewWithAdmin(nil, "adm").ResolveAdmin(h, "127.0.0.1:1")
			return err
		},
	}
	for name, resolve := range resolvers {
		for _, tt := range []struct {
			auth    string
			refused bool
		}{
			{"", false}, {"Bearer ", false}, {"Basic Zm9vOmJhcg==", false}, {"Bearer wrong", true}, {"bearer  wrong ", true},
		} {
			err := resolve(headers("Authorization", tt.auth))
			if !errors.Is(err, ErrUnauthorized) {
				t.Errorf("%s, Authorization %q: err = %v, want ErrUnauthorized", name, tt.auth, err)
			}
			if got := Refused(err); got != tt.refused {
				t.Errorf("%s, Authorization %q: Refused = %v, want %v", name, tt.auth, got, tt.refused)
			}
		}
	}
	if Refused(nil) || Refused(ErrForbidden) {
		t.Error("Refused is true of an error that refuses no key")
	}
}

// TestRepeatedIdentityHeadersRefused: an identity header given twice is a
// 400 naming it, never its first value: a proxy in front that appends the
// user, tenant or conversation it authenticated after the client's own
// would otherwise let the client's win. With keys, without, and for the
// admin key's tenant.
func TestRepeatedIdentityHeadersRefused(t *testing.T) {
	admin := NewWithAdmin([]Key{{Hash: HashKey("k-acme"), Tenant: "acme", ChooseTenant: true}}, "admin-secret")
	resolvers := map[string]struct {
		r    *Resolver
		auth string
	}{
		"without keys": {New(nil), ""},
		"with keys":    {New([]Key{{Hash: HashKey("k-acme"), Tenant: "acme", ChooseTenant: true}}), "Bearer k-acme"},
	}
	for _, name := range []string{HeaderUser, HeaderTenant, HeaderConversation, HeaderMode} {
		for rname, rc := range resolvers {
			t.Run(name+" "+rname, func(t *testing.T) {
				h := headers(HeaderUser, "alice")
				if rc.auth != "" {
					h.Set("Authorization", rc.auth)
				}
				h.Del(name)
				first, second := "mallory", "alice"
				if name == HeaderMode {
					first, second = "on", "off"
				}
				h.Add(name, first)
				h.Add(name, second)
				_, _, err := rc.r.Resolve(h, "")
				var he *HeaderError
				if !errors.As(err, &he) || he.Header != name {
					t.Fatalf("Resolve with %s given twice: %v, want a HeaderError naming it", name, err)
				}
			})
		}
	}
	t.Run("admin key's tenant", func(t *testing.T) {
		h := headers("Authorization", "Bearer admin-secret")
		h.Add(HeaderTenant, "globex")
		h.Add(HeaderTenant, "acme")
		tenant, err := admin.ResolveAdmin(h, "192.0.2.1:1234")
		var he *HeaderError
		if !errors.As(err, &he) || he.Header != HeaderTenant {
			t.Fatalf("ResolveAdmin with the tenant given twice: %q, %v, want a HeaderError naming it", tenant, err)
		}
	})
}

// TestIdentityHeaderInCaseFormsIsGivenTwice: a header's name is not case
// sensitive, and net/http files every case form under the canonical one,
// so x-memory-user and X-MEMORY-USER on one request are the header given
// twice: refused like any repeat, never resolved to the first.
func TestIdentityHeaderInCaseFormsIsGivenTwice(t *testing.T) {
	for _, name := range []string{HeaderUser, HeaderTenant, HeaderConversation, HeaderMode} {
		t.Run(name, func(t *testing.T) {
			errc := make(chan error, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _, err := New(nil).Resolve(r.Header, "")
				errc <- err
			}))
			t.Cleanup(srv.Close)
			conn, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			first, second := "mallory", "alice"
			if name == HeaderMode {
				first, second = "on", "off"
			}
			fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: memgate\r\n%s: %s\r\n%s: %s\r\nConnection: close\r\n\r\n",
				strings.ToLower(name), first, strings.ToUpper(name), second)
			if _, err := io.ReadAll(conn); err != nil {
				t.Fatal(err)
			}
			var he *HeaderError
			if err := <-errc; !errors.As(err, &he) || he.Header != name {
				t.Fatalf("Resolve with %s in two case forms: %v, want a HeaderError naming it", name, err)
			}
		})
	}
}

// TestCommaJoinedIdentityHeaderRefused: a proxy may pass a header given
// twice as one line, its values joined by commas (RFC 9110, section 5.3).
// Such a value is refused as the header given more than once — whatever
// the value's own check would say of it, which no id or mode passes today
// only by accident of their alphabets.
func TestCommaJoinedIdentityHeaderRefused(t *testing.T) {
	for _, name := range []string{HeaderUser, HeaderTenant, HeaderConversation, HeaderMode} {
		for _, v := range []string{"mallory, alice", "mallory,alice", "on, off"} {
			h := headers(name, v)
			if name != HeaderUser {
				h.Set(HeaderUser, "alice")
			}
			_, _, err := New(nil).Resolve(h, "")
			var he *HeaderError
			if !errors.As(err, &he) || he.Header != name || !strings.Contains(err.Error(), "more than once") {
				t.Errorf("Resolve with %s: %q: %v, want a HeaderError naming it given more than once", name, v, err)
			}
		}
	}
	h := headers("Authorization", "Bearer admin-secret", HeaderTenant, "globex, acme")
	_, err := NewWithAdmin(nil, "admin-secret").ResolveAdmin(h, "192.0.2.1:1234")
	if err == nil || !strings.Contains(err.Error(), "more than once") {
		t.Errorf("ResolveAdmin with the tenant comma-joined: %v, want it refused as given more than once", err)
	}
}

// TestHeaderErrorsSayWhatIsValid: the 400 for a malformed identity header
// tells the client what a valid value is — "invalid input" alone left an
// SDK user guessing why X-Memory-User: Bob Smith failed. (The explicit
// header stays strict; a body's user value never fails: TestResolveWithoutKeys.)
func TestHeaderErrorsSayWhatIsValid(t *testing.T) {
	r := New(nil)
	tests := []struct {
		name string
		h    http.Header
		body string
		want string
	}{
		{name: "user", h: headers(HeaderUser, "Bob Smith"), want: memory.IDChars},
		{name: "conversation", h: headers(HeaderConversation, "trip/2026"), want: memory.IDChars},
		{name: "tenant", h: headers(HeaderTenant, "a b"), want: memory.IDChars},
		{name: "mode", h: headers(HeaderMode, "sideways"), want: "on, off, read or write"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := r.Resolve(tc.h, tc.body)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Resolve error = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

func TestMatchKeys(t *testing.T) {
	match := MatchKeys("", "plain-key", HashKey("hashed-key"), "sha256:nothex")
	tests := []struct {
		auth string
		want bool
	}{
		{"Bearer plain-key", true},
		{"bearer  hashed-key ", true},
		{"Bearer " + HashKey("hashed-key"), false}, // the hash is not the key
		{"Bearer sha256:nothex", false},
		{"Bearer ", false},
		{"", false},
		{"Basic plain-key", false},
		{"Bearer other", false},
	}
	for _, tt := range tests {
		if got := match(tt.auth); got != tt.want {
			t.Errorf("match(%q) = %v, want %v", tt.auth, got, tt.want)
		}
	}
	if MatchKeys()("Bearer x") || MatchKeys("")("Bearer ") {
		t.Error("no key configured matched")
	}
}

// BenchmarkResolve measures one identity resolved with gateway keys (four
// configured, the last presented) and a user named by the body: what a
// memory request with keys pays each time it resolves its headers.
func BenchmarkResolve(b *testing.B) {
	var keys []Key
	for i := range 4 {
		keys = append(keys, Key{Hash: HashKey(fmt.Sprintf("gw-key-%d", i)), Tenant: fmt.Sprintf("t%d", i)})
	}
	r := New(keys)
	h := http.Header{"Authorization": {"Bearer gw-key-3"}, "Content-Type": {"application/json"}}
	b.ReportAllocs()
	for b.Loop() {
		if id, _, err := r.Resolve(h, ""); err != nil || id.Tenant != "t3" {
			b.Fatalf("%+v, %v", id, err)
		}
	}
}
