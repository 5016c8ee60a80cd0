package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/config"
	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// TestMetricsAccess: /metrics names the models tenants ask for (the
// breaker gauge), so with gateway keys only the metrics key and the admin
// key read it, never a tenant's key or none; without any key it answers
// only under the names the browser guard allows (no DNS-rebinding page).
func TestMetricsAccess(t *testing.T) {
	up := upstreamtest.New(t, echoUpstream())
	const model = "ft:gpt-4o-mini-2024-07-18:acme-corp::secret42"
	keyed := func() config.Config {
		cfg := storeConfigs(t, up)["sqlite"](t)
		cfg.Keys = []config.Key{{Hash: identity.HashKey("key-acme"), Tenant: "acme"}}
		cfg.AdminKey = identity.HashKey("key-admin")
		cfg.Security.MetricsKey = "key-metrics"
		return cfg
	}
	tests := []struct {
		name   string
		cfg    func() config.Config
		header map[string]string
		status int
	}{
		{"keys: none", keyed, nil, 401},
		{"keys: tenant key", keyed, map[string]string{"Authorization": "Bearer key-acme"}, 401},
		{"keys: wrong key", keyed, map[string]string{"Authorization": "Bearer nope"}, 401},
		{"keys: metrics key", keyed, map[string]string{"Authorization": "Bearer key-metrics"}, 200},
		{"keys: admin key", keyed, map[string]string{"Authorization": "Bearer key-admin"}, 200},
		{"keys, no metrics or admin key: tenant key", func() config.Config {
			c := keyed()
			c.AdminKey, c.Security.MetricsKey = "", ""
			return c
		}, map[string]string{"Authorization": "Bearer key-acme"}, 401},
		{"no keys: loopback", func() config.Config { return storeConfigs(t, up)["sqlite"](t) }, nil, 200},
		{"no keys: rebinding host", func() config.Config { return storeConfigs(t, up)["sqlite"](t) }, map[string]string{"Host": "attacker.example:8080"}, 403},
		{"no keys: cross-origin page", func() config.Config { return storeConfigs(t, up)["sqlite"](t) }, map[string]string{"Origin": "https://attacker.example"}, 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg()
			g := startGateway(t, cfg)
			// A tenant's request puts its model on the breaker gauge.
			req, _ := http.NewRequest(http.MethodPost, g.URL+"/v1/chat/completions", strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-Memory-User", "u")
			if len(cfg.Keys) > 0 {
				req.Header.Set("Authorization", "Bearer key-acme")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("chat: status %d", resp.StatusCode)
			}

			req, _ = http.NewRequest(http.MethodGet, g.URL+"/metrics", nil)
			for k, v := range tt.header {
				if k == "Host" {
					req.Host = v
					continue
				}
				req.Header.Set(k, v)
			}
			resp, err = http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("/metrics: status %d, want %d", resp.StatusCode, tt.status)
			}
			if leaked := strings.Contains(string(body), model); leaked != (tt.status == 200) {
				t.Fatalf("/metrics (status %d) names the tenant's model: %v", resp.StatusCode, leaked)
			}
		})
	}
}
