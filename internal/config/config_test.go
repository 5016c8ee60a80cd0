package config

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
}

// TestRepositoryConfigMatchesDefaults keeps config.yaml honest: it documents
// every key with its default, so decoding it must give exactly Default().
func TestRepositoryConfigMatchesDefaults(t *testing.T) {
	data, err := os.ReadFile("../../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got Config
	if err := Decode(data, &got); err != nil {
		t.Fatalf("config.yaml: %v", err)
	}
	want := Default()
	if len(got.ContextWindows) == 0 {
		got.ContextWindows = nil
	}
	if len(got.Capture.RedactPatterns) == 0 {
		got.Capture.RedactPatterns = nil
	}
	if len(got.Recall.FactTTL) == 0 {
		got.Recall.FactTTL = nil
	}
	if len(got.Keys) == 0 {
		got.Keys = nil
	}
	if len(got.Security.AllowedHosts) == 0 {
		got.Security.AllowedHosts = nil
	}
	if len(got.Security.AllowedOrigins) == 0 {
		got.Security.AllowedOrigins = nil
	}
	if len(got.Security.PrivateModels) == 0 {
		got.Security.PrivateModels = nil
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("config.yaml differs from Default():\n got %+v\nwant %+v", got, want)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yml", "listen: \":9999\"\nupstream:\n  retries: 4\n  retry_base_delay: 10ms\nmemory:\n  load_timeout: 1s\n")
	unknown := write("unknown.yml", "listen: \":1\"\nupstream:\n  bogus_key: 1\n")
	badDur := write("dur.yml", "memory:\n  load_timeout: soon\n")
	badVal := write("val.yml", "store:\n  driver: mysql\n")
	anth := write("anthropic.yml", "upstream:\n  anthropic:\n    base_url: http://claude.test/v1\n")
	cache := write("cache.yml", "memory:\n  cache:\n    vectors_mb: 512\n    items_mb: 64\n")
	noCache := write("nocache.yml", "memory:\n  cache:\n    turns_mb: 0\n")
	noInterval := write("nointerval.yml", "capture:\n  enrich_interval: 0s\n")
	longRetry := write("longretry.yml", "capture:\n  retry_for: 25h\n")
	stuck := write("stuck.yml", "capture:\n  lock_stuck_after: 90s\n")
	noStuck := write("nostuck.yml", "capture:\n  lock_stuck_after: 0s\n")
	noHistory := write("nohistory.yml", "capture:\n  max_history_messages: 0\n")
	nullPass := write("nullpass.yml", "security:\n  passthrough:\n")
	noPass := write("nopass.yml", "security:\n  passthrough: []\n")

	tests := []struct {
		name    string
		env     map[string]string
		check   func(t *testing.T, c Config)
		wantErr string
	}{
		{name: "defaults", env: nil, check: func(t *testing.T, c Config) {
			if c.Listen != "127.0.0.1:8080" || c.Upstream.BaseURL != "https://api.openai.com/v1" || c.MaxBodyBytes != 2<<20 {
				t.Errorf("unexpected defaults: %+v", c)
			}
		}},
		{name: "file", env: map[string]string{"GATEWAY_CONFIG": good}, check: func(t *testing.T, c Config) {
			if c.Listen != ":9999" || c.Upstream.Retries != 4 || c.Upstream.RetryBaseDelay.D() != 10*time.Millisecond || c.Memory.LoadTimeout.D() != time.Second {
				t.Errorf("file not applied: %+v", c)
			}
		}},
		{name: "env overrides file", env: map[string]string{
			"GATEWAY_CONFIG": good, "GATEWAY_LISTEN": "127.0.0.1:1", "GATEWAY_UPSTREAM_BASE_URL": "http://u:1/v1",
			"GATEWAY_UPSTREAM_API_KEY": "k", "GATEWAY_LOG_LEVEL": "debug", "GATEWAY_MAX_BODY_BYTES": "100",
			"GATEWAY_STORE": "postgres", "GATEWAY_POSTGRES_URL": "postgres://x", "GATEWAY_REDIS_URL": "redis://y",
			"GATEWAY_SQLITE_PATH": "/tmp/x.db",
		}, check: func(t *testing.T, c Config) {
			if c.Listen != "127.0.0.1:1" || c.Upstream.BaseURL != "http://u:1/v1" || c.Upstream.APIKey != "k" ||
				c.LogLevel != "debug" || c.MaxBodyBytes != 100 || c.Store.Driver != "postgres" ||
				c.Store.PostgresURL != "postgres://x" || c.Store.RedisURL != "redis://y" || c.Store.SQLitePath != "/tmp/x.db" {
				t.Errorf("env not applied: %+v", c)
			}
		}},
		{name: "anthropic", env: map[string]string{"GATEWAY_CONFIG": anth}, check: func(t *testing.T, c Config) {
			if c.Upstream.Anthropic.BaseURL != "http://claude.test/v1" || c.Upstream.Anthropic.APIKey != "" || c.Upstream.BaseURL != "https://api.openai.com/v1" {
				t.Errorf("anthropic not applied: %+v", c.Upstream)
			}
		}},
		{name: "anthropic env", env: map[string]string{"GATEWAY_CONFIG": anth, "GATEWAY_ANTHROPIC_BASE_URL": "https://a.test/v1", "GATEWAY_ANTHROPIC_API_KEY": "sk-ant"},
			check: func(t *testing.T, c Config) {
				if c.Upstream.Anthropic.BaseURL != "https://a.test/v1" || c.Upstream.Anthropic.APIKey != "sk-ant" {
					t.Errorf("anthropic env not applied: %+v", c.Upstream.Anthropic)
				}
			}},
		{name: "anthropic default", env: nil, check: func(t *testing.T, c Config) {
			if c.Upstream.Anthropic.BaseURL != "https://api.anthropic.com/v1" {
				t.Errorf("anthropic default %q", c.Upstream.Anthropic.BaseURL)
			}
		}},
		{name: "cache sizes", env: map[string]string{"GATEWAY_CONFIG": cache}, check: func(t *testing.T, c Config) {
			if want := (Cache{VectorsMB: 512, TextsMB: 128, ItemsMB: 64, TurnsMB: 16, RecentMB: 8}); c.Memory.Cache != want {
				t.Errorf("memory.cache = %+v, want %+v", c.Memory.Cache, want)
			}
		}},
		{name: "embedder default", env: nil, check: func(t *testing.T, c Config) {
			if e := c.Recall.Embeddings; e.Provider != "encoder" || e.Dims() != EncoderDims {
				t.Errorf("embedder %s/%d, want encoder/%d", e.Provider, e.Dims(), EncoderDims)
			}
		}},
		{name: "embedder env", env: map[string]string{"GATEWAY_EMBEDDINGS_PROVIDER": "local"}, check: func(t *testing.T, c Config) {
			if e := c.Recall.Embeddings; e.Provider != "local" || e.Dims() != 384 {
				t.Errorf("embedder %s/%d, want local/384", e.Provider, e.Dims())
			}
		}},
		{name: "zero cache", env: map[string]string{"GATEWAY_CONFIG": noCache}, wantErr: "memory.cache.turns_mb"},
		{name: "zero enrich interval", env: map[string]string{"GATEWAY_CONFIG": noInterval}, wantErr: "capture.enrich_interval"},
		{name: "lock stuck after default", env: nil, check: func(t *testing.T, c Config) {
			if got := c.Capture.LockStuckAfter.D(); got != 5*time.Minute {
				t.Errorf("capture.lock_stuck_after = %v, want 5m", got)
			}
		}},
		{name: "lock stuck after", env: map[string]string{"GATEWAY_CONFIG": stuck}, check: func(t *testing.T, c Config) {
			if got := c.Capture.LockStuckAfter.D(); got != 90*time.Second {
				t.Errorf("capture.lock_stuck_after = %v, want 90s", got)
			}
		}},
		{name: "zero lock stuck after", env: map[string]string{"GATEWAY_CONFIG": noStuck}, wantErr: "capture.lock_stuck_after"},
		{name: "retries outliving a tombstone", env: map[string]string{"GATEWAY_CONFIG": longRetry}, wantErr: "capture.retry_for"},
		{name: "no history stored", env: map[string]string{"GATEWAY_CONFIG": noHistory}, wantErr: "capture.max_history_messages"},
		{name: "bad anthropic", env: map[string]string{"GATEWAY_ANTHROPIC_BASE_URL": "api.anthropic.com"}, wantErr: "upstream.anthropic.base_url"},
		{name: "unknown key", env: map[string]string{"GATEWAY_CONFIG": unknown}, wantErr: "bogus_key"},
		{name: "bad duration", env: map[string]string{"GATEWAY_CONFIG": badDur}, wantErr: "soon"},
		{name: "bad driver", env: map[string]string{"GATEWAY_CONFIG": badVal}, wantErr: "store.driver"},
		{name: "null passthrough is the default", env: map[string]string{"GATEWAY_CONFIG": nullPass}, check: func(t *testing.T, c Config) {
			if !reflect.DeepEqual(c.Security.Passthrough, DefaultPassthrough) {
				t.Errorf("passthrough = %q, want %q", c.Security.Passthrough, DefaultPassthrough)
			}
		}},
		{name: "empty passthrough allows none", env: map[string]string{"GATEWAY_CONFIG": noPass}, check: func(t *testing.T, c Config) {
			if c.Security.Passthrough == nil || len(c.Security.Passthrough) != 0 {
				t.Errorf("passthrough = %#v, want empty", c.Security.Passthrough)
			}
		}},
		{name: "bad log level", env: map[string]string{"GATEWAY_LOG_LEVEL": "loud"}, wantErr: "log_level"},
		{name: "bad body size", env: map[string]string{"GATEWAY_MAX_BODY_BYTES": "big"}, wantErr: "GATEWAY_MAX_BODY_BYTES"},
		{name: "zero body size", env: map[string]string{"GATEWAY_MAX_BODY_BYTES": "0"}, wantErr: "max_body_bytes"},
		{name: "bad upstream", env: map[string]string{"GATEWAY_UPSTREAM_BASE_URL": "ftp://x"}, wantErr: "upstream.base_url"},
		{name: "postgres without url", env: map[string]string{"GATEWAY_STORE": "postgres"}, wantErr: "store.postgres_url"},
		{name: "missing file", env: map[string]string{"GATEWAY_CONFIG": filepath.Join(dir, "nope.yml")}, wantErr: "read config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(envOf(tt.env))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want mention of %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestValidateKeys(t *testing.T) {
	c := Default()
	c.Keys = []Key{{Hash: "plain", Tenant: ""}}
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "keys[0].hash") || !strings.Contains(err.Error(), "keys[0].tenant") {
		t.Fatalf("err = %v", err)
	}
	c.Keys = []Key{{Hash: "sha256:" + strings.Repeat("ab", 32), Tenant: "acme"}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestValidateHashHex reproduces finding 9: "sha256:" and 64 characters
// that are not hex passed as the admin key's (and a gateway key's) hash.
func TestValidateHashHex(t *testing.T) {
	notHex := "sha256:" + strings.Repeat("zz", 32)
	tests := []struct {
		name    string
		mutate  func(c *Config)
		wantErr string
	}{
		{"admin non-hex", func(c *Config) { c.AdminKey = notHex }, "admin_key"},
		{"admin short", func(c *Config) { c.AdminKey = "sha256:abcd" }, "admin_key"},
		{"metrics key short", func(c *Config) { c.Security.MetricsKey = "sha256:abcd" }, "security.metrics_key"},
		{"admin hex", func(c *Config) { c.AdminKey = "sha256:" + strings.Repeat("AB", 32) }, ""},
		{"admin plain", func(c *Config) { c.AdminKey = "a plain admin secret" }, ""},
		{"key non-hex", func(c *Config) { c.Keys = []Key{{Hash: notHex, Tenant: "t"}} }, "keys[0].hash"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(&c)
			err := c.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want mention of %q", err, tt.wantErr)
			}
		})
	}
}

// TestListenDefault: with no listen address configured the gateway listens
// on loopback, or on every interface once gateway keys protect it; an
// explicit address is kept.
func TestListenDefault(t *testing.T) {
	dir := t.TempDir()
	keyed := filepath.Join(dir, "keyed.yml")
	if err := os.WriteFile(keyed, []byte("keys:\n  - hash: sha256:"+strings.Repeat("ab", 32)+"\n    tenant: acme\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyListen := filepath.Join(dir, "empty.yml")
	if err := os.WriteFile(emptyListen, []byte("listen: \"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"nothing", nil, DefaultListen},
		{"empty in file", map[string]string{"GATEWAY_CONFIG": emptyListen}, DefaultListen},
		{"keys in file", map[string]string{"GATEWAY_CONFIG": keyed}, DefaultListenKeyed},
		{"GATEWAY_KEY", map[string]string{"GATEWAY_KEY": "s3cret-key"}, DefaultListenKeyed},
		{"admin key alone keeps loopback", map[string]string{"GATEWAY_ADMIN_KEY": "adm"}, DefaultListen},
		{"explicit", map[string]string{"GATEWAY_LISTEN": ":8080"}, ":8080"},
		{"explicit with keys", map[string]string{"GATEWAY_CONFIG": keyed, "GATEWAY_LISTEN": "127.0.0.1:9"}, "127.0.0.1:9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(envOf(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if c.Listen != tt.want {
				t.Fatalf("listen %q, want %q", c.Listen, tt.want)
			}
		})
	}
}

func TestGatewayKeyEnv(t *testing.T) {
	for _, v := range []string{"s3cret-key", "sha256:" + strings.Repeat("0f", 32)} {
		c, err := Load(envOf(map[string]string{"GATEWAY_KEY": v}))
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Keys) != 1 || c.Keys[0].Tenant != "default" || !validHash(c.Keys[0].Hash) || strings.Contains(c.Keys[0].Hash, "s3cret") {
			t.Fatalf("keys %+v", c.Keys)
		}
	}
	if _, err := Load(envOf(map[string]string{"GATEWAY_KEY": "sha256:nothex"})); err == nil || !strings.Contains(err.Error(), "keys[0].hash") {
		t.Fatalf("bad hashed GATEWAY_KEY: err = %v", err)
	}
}

func TestValidateSecurity(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(s *Security)
		wantErr string
	}{
		{"passthrough no method", func(s *Security) { s.Passthrough = []string{"/v1/files"} }, "security.passthrough[0]"},
		{"passthrough lower method", func(s *Security) { s.Passthrough = []string{"get /v1/files"} }, "security.passthrough[0]"},
		{"passthrough inner star", func(s *Security) { s.Passthrough = []string{"GET /v1/*/x"} }, "security.passthrough[0]"},
		{"passthrough ok", func(s *Security) { s.Passthrough = []string{"GET /v1/files", "DELETE /v1/files/*"} }, ""},
		{"private model empty", func(s *Security) { s.PrivateModels = []string{""} }, "security.private_models[0]"},
		{"private model with a space", func(s *Security) { s.PrivateModels = []string{"ft:a b"} }, "security.private_models[0]"},
		{"private model inner star", func(s *Security) { s.PrivateModels = []string{"ft:*:acme"} }, "security.private_models[0]"},
		{"private models ok", func(s *Security) {
			s.PrivateModels = []string{"ft:gpt-4o-mini-2024-07-18:acme-corp::9abcDEF", "ft:gpt-4o:acme-corp:*", "acme/llama-3-8b-ft", "*"}
		}, ""},
		{"origin with path", func(s *Security) { s.AllowedOrigins = []string{"https://a.example/app"} }, "security.allowed_origins[0]"},
		{"origin ok", func(s *Security) { s.AllowedOrigins = []string{"http://localhost:3000"} }, ""},
		{"host with slash", func(s *Security) { s.AllowedHosts = []string{"a.example/x"} }, "security.allowed_hosts[0]"},
		{"negative burst", func(s *Security) { s.FailedAuthBurst = -1 }, "security.failed_auth_burst"},
		{"limit off", func(s *Security) { s.FailedAuthBurst, s.FailedAuthRefill = 0, 0 }, ""},
		{"no max age", func(s *Security) { s.SessionMaxAge = 0 }, "security.session_max_age"},
		{"no provider state retention", func(s *Security) { s.ProviderStateRetention = 0 }, "security.provider_state_retention"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.mutate(&c.Security)
			err := c.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want mention of %q", err, tt.wantErr)
			}
		})
	}
}

func TestValidateFillRecallWhen(t *testing.T) {
	for _, tc := range []struct {
		when string
		ok   bool
	}{{"always", true}, {"asked", true}, {"", false}, {"sometimes", false}} {
		c := Default()
		c.Memory.FillRecallWhen = tc.when
		err := c.Validate()
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "memory.fill_recall_when")) {
			t.Errorf("fill_recall_when %q: err = %v, want ok %v", tc.when, err, tc.ok)
		}
	}
	c := Default()
	c.Memory.Shares.StatementRecall = 1.5
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "memory.shares.statement_recall") {
		t.Errorf("statement_recall 1.5: err = %v", err)
	}
}

func TestDerivedSettings(t *testing.T) {
	maxCtx := Default().Memory.MaxContextTokens
	tests := []struct {
		name                    string
		edit                    func(*Config)
		window                  int
		wantHistory, wantBudget int
		wantWarnings            int
	}{
		{name: "compaction's tail beats recent messages", edit: func(c *Config) {
			c.Memory.RecentMessages, c.Compaction.MaxMessages, c.Compaction.KeepMessages, c.Memory.HoldSummary = 4, 10, 5, false
		}, window: 128000, wantHistory: 15, wantBudget: maxCtx, wantWarnings: 2},
		{name: "held summary doubles the tail", edit: func(c *Config) {
			c.Memory.RecentMessages, c.Compaction.MaxMessages, c.Compaction.KeepMessages, c.Memory.HoldSummary = 4, 10, 5, true
		}, window: 128000, wantHistory: 30, wantBudget: maxCtx, wantWarnings: 2},
		{name: "recent messages beat compaction's tail", edit: func(c *Config) {
			c.Memory.RecentMessages, c.Compaction.MaxMessages, c.Compaction.KeepMessages, c.Memory.HoldSummary = 40, 10, 5, true
		}, window: 128000, wantHistory: 40, wantBudget: maxCtx, wantWarnings: 2},
		{name: "no compaction: recent messages alone", edit: func(c *Config) {
			c.Compaction.Enabled, c.Memory.RecentMessages = false, 7
		}, window: 128000, wantHistory: 7, wantBudget: maxCtx, wantWarnings: 1},
		{name: "no recent messages stays none", edit: func(c *Config) { c.Memory.RecentMessages = 0 },
			window: 128000, wantHistory: 0, wantBudget: maxCtx, wantWarnings: 2},
		{name: "small window less the reserve", edit: func(c *Config) {
			c.Memory.RecentMessages, c.Memory.MaxContextTokens, c.Memory.CompletionReserve = 0, 100000, 1000
		}, window: 8000, wantBudget: 7000, wantWarnings: 2},
		{name: "window below the reserve", edit: func(c *Config) {
			c.Memory.RecentMessages, c.Memory.CompletionReserve = 0, 9000
		}, window: 8000, wantBudget: 0, wantWarnings: 2},
		{name: "upstream key: no warnings", edit: func(c *Config) { c.Memory.RecentMessages, c.Upstream.APIKey = 0, "sk-test" },
			window: 128000, wantBudget: maxCtx},
		{name: "extraction off: the summariser's warning only", edit: func(c *Config) {
			c.Memory.RecentMessages, c.Recall.Extraction.Enabled = 0, false
		}, window: 128000, wantBudget: maxCtx, wantWarnings: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			c.Upstream.APIKey = ""
			tt.edit(&c)
			if got := c.HistoryMessages(); got != tt.wantHistory {
				t.Errorf("HistoryMessages() = %d, want %d", got, tt.wantHistory)
			}
			if got := c.Budget(tt.window); got != tt.wantBudget {
				t.Errorf("Budget(%d) = %d, want %d", tt.window, got, tt.wantBudget)
			}
			if got := c.Warnings(); len(got) != tt.wantWarnings {
				t.Errorf("Warnings() = %q, want %d", got, tt.wantWarnings)
			}
		})
	}
}

// TestWarningsNameRealKeys holds the start-up warnings to the keys an
// operator can set: each dotted key a warning names (compaction.api_key)
// must be a key of Config, or the operator looks for one that does not
// exist.
func TestWarningsNameRealKeys(t *testing.T) {
	keys := map[string]bool{}
	yamlKeys(reflect.TypeOf(Config{}), "", keys)
	c := Default()
	c.Upstream.APIKey = ""
	warnings := c.Warnings()
	if len(warnings) == 0 {
		t.Fatal("Default() without an upstream key gives no warnings")
	}
	dotted := regexp.MustCompile(`\b[a-z_]+(\.[a-z_]+)+\b`)
	for _, w := range warnings {
		named := dotted.FindAllString(w, -1)
		if len(named) == 0 {
			t.Errorf("warning %q names no key", w)
		}
		for _, k := range named {
			if !keys[k] {
				t.Errorf("warning %q names %s, which is not a configuration key", w, k)
			}
		}
	}
}

// yamlKeys adds to keys the dotted YAML path of every field of t, under
// prefix.
func yamlKeys(t reflect.Type, prefix string, keys map[string]bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return
	}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		if prefix != "" {
			name = prefix + "." + name
		}
		keys[name] = true
		yamlKeys(t.Field(i).Type, name, keys)
	}
}

// TestDefaultUpstreamTimeoutsOutwaitTheSDKs: the official OpenAI and
// Anthropic SDKs wait 10 minutes for a request by default, and a reasoning
// model may answer a non-streamed request only after minutes, or stream
// nothing while it thinks (OpenAI's chat completions send no bytes during
// reasoning). A shorter default would have memgate cut a request its SDK
// was still waiting for: a 504 the SDK retries (a new generation, billed,
// each time), or a stream broken off mid-answer.
func TestDefaultUpstreamTimeoutsOutwaitTheSDKs(t *testing.T) {
	const sdkTimeout = 10 * time.Minute
	up := Default().Upstream
	if up.FirstByteTimeout.D() < sdkTimeout {
		t.Errorf("upstream.first_byte_timeout %v, want at least the SDKs' %v", up.FirstByteTimeout.D(), sdkTimeout)
	}
	if up.IdleStreamTimeout.D() < sdkTimeout {
		t.Errorf("upstream.idle_stream_timeout %v, want at least the SDKs' %v", up.IdleStreamTimeout.D(), sdkTimeout)
	}
}
