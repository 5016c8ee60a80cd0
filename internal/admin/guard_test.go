package admin

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
)

func TestManagementAPIIsClosedByDefault(t *testing.T) {
	const gwKey, adminKey = "gw-secret", "admin-secret"
	gateway := []identity.Key{{Hash: identity.HashKey(gwKey), Tenant: "acme"}}
	tests := []struct {
		name       string
		resolver   *identity.Resolver
		remote     string
		header     map[string]string
		wantStatus int
		wantTenant string
	}{
		{"no key configured: a remote peer is refused, whatever X-Forwarded-For says", identity.New(nil), "203.0.113.7:40000",
			map[string]string{"X-Forwarded-For": "127.0.0.1"}, 403, ""},
		{"no key configured: loopback answers", identity.New(nil), "127.0.0.1:40000", nil, 200, memory.DefaultTenant},
		{"no key configured: IPv6 loopback answers", identity.New(nil), "[::1]:40000", nil, 200, memory.DefaultTenant},
		{"admin key configured: none presented, even on loopback", identity.NewWithAdmin(nil, adminKey), "127.0.0.1:40000", nil, 401, ""},
		{"admin key opens any tenant from anywhere", identity.NewWithAdmin(gateway, adminKey), "203.0.113.7:40000",
			map[string]string{"Authorization": "Bearer " + adminKey, "X-Memory-Tenant": "globex"}, 200, "globex"},
		{"hashed admin key", identity.NewWithAdmin(nil, identity.HashKey(adminKey)), "203.0.113.7:40000",
			map[string]string{"Authorization": "Bearer " + adminKey}, 200, memory.DefaultTenant},
		{"gateway key opens its own tenant", identity.NewWithAdmin(gateway, adminKey), "203.0.113.7:40000",
			map[string]string{"Authorization": "Bearer " + gwKey}, 200, "acme"},
		{"gateway key may not choose another tenant", identity.NewWithAdmin(gateway, ""), "203.0.113.7:40000",
			map[string]string{"Authorization": "Bearer " + gwKey, "X-Memory-Tenant": "globex"}, 403, ""},
		{"wrong key", identity.NewWithAdmin(gateway, adminKey), "127.0.0.1:40000",
			map[string]string{"Authorization": "Bearer nope"}, 401, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			prep := preparerFunc(func(_ context.Context, req memory.Request) (memory.Prepared, error) {
				got = req.Tenant
				return memory.Prepared{Messages: memory.Raws(req.Messages)}, nil
			})
			srv, err := server.New(prometheus.NewRegistry(), nil, 0, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			New(tc.resolver, nil, nil, prep, 1<<20, 0, slog.New(slog.DiscardHandler)).Register(srv)
			req := httptest.NewRequest(http.MethodPost, "/v1/memory/preview", strings.NewReader(chat))
			req.RemoteAddr = tc.remote
			req.Header.Set("X-Memory-User", "alice")
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, req)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.wantStatus, rec.Body)
			}
			if got != tc.wantTenant {
				t.Fatalf("tenant %q, want %q", got, tc.wantTenant)
			}
			// Every route is guarded, not only the preview.
			if tc.wantStatus != 200 {
				for _, path := range []string{"/v1/memory/conversations?user=alice", "/v1/memory/users/alice/facts"} {
					r := httptest.NewRequest(http.MethodGet, path, nil)
					r.RemoteAddr = tc.remote
					for k, v := range tc.header {
						r.Header.Set(k, v)
					}
					rec := httptest.NewRecorder()
					srv.Handler().ServeHTTP(rec, r)
					if rec.Code != tc.wantStatus {
						t.Errorf("%s: status %d, want %d", path, rec.Code, tc.wantStatus)
					}
				}
			}
		})
	}
}
