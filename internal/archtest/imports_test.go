// Package archtest guards memgate's import graph. It is an allow-list: each
// package of the module names the internal packages it may import, and why.
// A new package, a new import or a package that disappears fails the test
// until the list (and docs/architecture.md) says so.
package archtest

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/memgate/memgate/"

// layer is one package's permitted internal imports and the reason for them.
type layer struct {
	why   string
	allow []string
}

// Shorthands for groups many layers share.
var (
	domain   = []string{"internal/memory"}
	dialects = []string{"internal/dialect", "internal/dialect/anthropic", "internal/dialect/chat", "internal/dialect/responses"}
)

func with(groups ...[]string) []string { return slices.Concat(groups...) }

// layers is the allow-list, from the leaves up to the binary.
var layers = map[string]layer{
	// Leaves: the domain and the pure helpers see nothing of the module.
	"internal/memory":      {"the domain: types and errors, standard library only", nil},
	"internal/lexicon":     {"a word list and its expansion: data, no memgate types", nil},
	"internal/vec":         {"vector arithmetic", nil},
	"internal/encoder":     {"the sentence encoder: a model over gonum, no memgate types", nil},
	"internal/telemetry":   {"OpenTelemetry spans the memory path and the stores start from the request's context: must stay a leaf", nil},
	"internal/seen":        {"a bounded set of recently seen keys", nil},
	"internal/keylock":     {"a mutex per key, its waits ended by a context", nil},
	"internal/config":      {"strict YAML/env config: read by cmd/gateway alone, which hands each package its own options", nil},
	"internal/apierr":      {"the OpenAI error shape every route answers with", nil},
	"internal/dialect/sse": {"server-sent events framing", nil},

	"migrations/sqlite":   {"the embedded store's schema, as embedded SQL files", nil},
	"migrations/postgres": {"PostgreSQL's schema, as embedded SQL files", nil},

	"internal/lexicon/gen":       {"generates the lexicon asset", []string{"internal/lexicon"}},
	"internal/encoder/gen":       {"generates the encoder asset", []string{"internal/encoder"}},
	"internal/engine/prompt/gen": {"generates the prompt's table of Latin lookalikes (confusables.go)", nil},

	// Who is asking, and the edge.
	"internal/identity": {"keys, tenant, user, conversation: answers in the domain's terms and the client's error shape", with(domain, []string{"internal/apierr"})},
	"internal/server":   {"the echo server, guards and health: the edge knows errors, not memory", []string{"internal/apierr"}},

	// API dialects: each adapter turns its API into domain messages and back.
	"internal/dialect/body":      {"JSON body helpers the adapters share", domain},
	"internal/dialect/chat":      {"the Chat Completions adapter: request, reply, stream", with(domain, []string{"internal/dialect/body", "internal/dialect/sse"})},
	"internal/dialect/anthropic": {"the Anthropic messages adapter, rendered through chat's messages", with(domain, []string{"internal/dialect/body", "internal/dialect/chat", "internal/dialect/sse"})},
	"internal/dialect/responses": {"the Responses adapter, rendered through chat's messages", with(domain, []string{"internal/dialect/body", "internal/dialect/chat", "internal/dialect/sse"})},
	"internal/dialect":           {"picks the adapter of a route and reads the memory headers", with(domain, dialects[1:], []string{"internal/apierr", "internal/dialect/body"})},
	"internal/tokens":            {"token counting over domain messages; remembers counts in the one cache mechanism", with(domain, []string{"internal/engine/cache"})},
	"internal/redact":            {"removes secrets from domain messages before they are stored", domain},

	// Forwarding: the one ReverseProxy and its transport.
	"internal/proxy/upstream": {"the upstream http.Transport, and the bound on the bodies side models read", nil},
	"internal/proxy": {"forwarding: identifies, asks the memory core (by interfaces it declares) and tees the reply",
		with(domain, dialects, []string{"internal/apierr", "internal/identity", "internal/proxy/upstream", "internal/server"})},

	// The memory core.
	"internal/engine/cache":  {"one cache mechanism, revision in the key", domain},
	"internal/engine/recall": {"search, indexing and fact extraction over stores it declares (vector norms from internal/ranking, as the stores compute them); keeps embeddings in the one cache mechanism", with(domain, []string{"internal/engine/cache", "internal/lexicon", "internal/ranking", "internal/seen", "internal/telemetry", "internal/vec"})},
	"internal/engine/prompt": {"budgeted assembly; reads recall's passages; records forgets as the one cache mechanism does", with(domain, []string{"internal/engine/cache", "internal/engine/recall", "internal/telemetry"})},
	"internal/engine/record": {"the durable write path: replies reach it parsed, so no dialect", with(domain, []string{"internal/keylock", "internal/pace", "internal/telemetry"})},
	"internal/engine/enrich": {"enrichment: drains the write path's enrichment queue, summaries and pins; tells the hooks' caches when a batch was read", with(domain, []string{"internal/engine/cache", "internal/engine/record", "internal/keylock", "internal/pace", "internal/seen", "internal/telemetry"})},
	"internal/engine": {"the facade: composes the core's parts over one store and reconnects when it returns (its store watch paced by internal/pace)",
		with(domain, []string{"internal/encoder", "internal/engine/enrich", "internal/engine/prompt", "internal/engine/recall", "internal/engine/record", "internal/lexicon", "internal/pace"})},

	// Stores: adapters that never import their consumers (engine/prompt,
	// recall, record, enrich, proxy); they share the contract's rules, the
	// cache mechanism and the in-memory index.
	"internal/store/contract":  {"the stores' shared non-SQL rules: the domain only", domain},
	"internal/pace":            {"a background task run on request, coalesced and spaced out (post-erasure maintenance), and the context-aware sleep the background loops share", nil},
	"internal/ranking":         {"BM25 (the in-memory text index it scores, the ranker of a window of candidates), FTS5 word folding and top-k, shared by the stores and the item index: the domain only", domain},
	"internal/itemindex":       {"the in-memory item index the SQL stores search: caches what it ranks with internal/ranking", with(domain, []string{"internal/engine/cache", "internal/ranking", "internal/store/contract", "internal/vec"})},
	"internal/store/search":    {"the stores' recall reads: the in-memory item index first, the store's SQL for a user too large for it (whose items a store may rank by id, internal/ranking's Scored); traced as the stores are", with(domain, []string{"internal/itemindex", "internal/ranking", "internal/store/contract", "internal/telemetry"})},
	"internal/store/sqlite":    {"SQL for the embedded store; ranks a too-large user's candidates with internal/ranking; renews its chat locks with internal/pace", with(domain, []string{"internal/engine/cache", "internal/itemindex", "internal/pace", "internal/ranking", "internal/store/contract", "internal/store/search", "internal/telemetry", "internal/vec", "migrations/sqlite"})},
	"internal/store/postgres":  {"SQL for PostgreSQL + pgvector", with(domain, []string{"internal/engine/cache", "internal/itemindex", "internal/pace", "internal/store/contract", "internal/store/search", "internal/telemetry", "migrations/postgres"})},
	"internal/store/redis":     {"the Redis Streams queues beside the PostgreSQL store: commands only; post-purge maintenance paced by internal/pace", with(domain, []string{"internal/pace"})},
	"internal/store/storetest": {"the contract suites every store runs, the engine cache they run the freshness suite through, and the stores' shared contract code (its migrations and errors) they check against", with(domain, []string{"internal/engine/cache", "internal/store/contract"})},

	// Surfaces beside the proxy.
	"internal/admin":     {"the management API", with(domain, []string{"internal/apierr", "internal/dialect", "internal/engine/record", "internal/identity", "internal/server"})},
	"internal/mcpserver": {"MCP tools over the management API", with(domain, []string{"internal/admin", "internal/apierr", "internal/dialect", "internal/identity", "internal/server"})},
	"internal/ui":        {"the web inspector, reading through admin", with(domain, []string{"internal/admin", "internal/dialect/body", "internal/dialect/chat", "internal/identity", "internal/server"})},
	"internal/savings":   {"tokens saved, counted in the domain's terms", domain},
	"internal/tracing":   {"wraps the memory core's two sides by their methods alone", with(domain, []string{"internal/apierr", "internal/telemetry"})},

	// Test support.
	"internal/testenv":             {"the test services' URLs", nil},
	"internal/upstreamtest":        {"a fake provider speaking the wire formats", nil},
	"internal/dialect/dialecttest": {"the adapters' shared stream checks", with(domain, []string{"internal/dialect/chat"})},
	"internal/archtest":            {"this test", nil},

	// The binary: wiring lives here and only here.
	"cmd/gateway": {"run, routes and wiring, with concrete types", with(domain, dialects[1:2], []string{
		"internal/admin", "internal/config", "internal/engine", "internal/engine/enrich", "internal/engine/prompt", "internal/engine/cache",
		"internal/engine/recall", "internal/engine/record", "internal/identity", "internal/itemindex", "internal/mcpserver",
		"internal/proxy", "internal/proxy/upstream", "internal/redact", "internal/savings", "internal/server", "internal/store/postgres",
		"internal/store/redis", "internal/store/sqlite", "internal/tokens", "internal/tracing", "internal/ui"})},
}

// imports lists each package under internal/, migrations/ and cmd/gateway
// with its
// direct imports within the module (test files excluded).
func imports(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-e", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"internal/...", module+"migrations/...", module+"cmd/gateway").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		var internal []string
		for _, imp := range f[1:] {
			if rel, ok := strings.CutPrefix(imp, module); ok {
				internal = append(internal, rel)
			}
		}
		m[strings.TrimPrefix(f[0], module)] = internal
	}
	return m
}

func TestImportGraph(t *testing.T) {
	all := imports(t)
	for pkg, imps := range all {
		l, ok := layers[pkg]
		if !ok {
			t.Errorf("%s is not in the allow-list: add it to layers with its permitted imports and why", pkg)
			continue
		}
		for _, imp := range imps {
			if !slices.Contains(l.allow, imp) {
				t.Errorf("%s imports %s, which its layer does not allow (%s)", pkg, imp, l.why)
			}
		}
	}
	for pkg, l := range layers {
		if _, ok := all[pkg]; !ok {
			t.Errorf("%s is in the allow-list but no longer exists: remove it (and from docs/architecture.md)", pkg)
		}
		if l.why == "" {
			t.Errorf("%s has no reason", pkg)
		}
		for _, imp := range l.allow {
			if _, ok := all[imp]; !ok {
				t.Errorf("%s may import %s, which no longer exists", pkg, imp)
			}
		}
	}
}

// TestOnlyTheBinaryWires: proxy, config and the concrete stores are
// imported by cmd/gateway alone (the stores' own Redis-over-PostgreSQL
// composition aside).
func TestOnlyTheBinaryWires(t *testing.T) {
	for pkg, imps := range imports(t) {
		if pkg == "cmd/gateway" {
			continue
		}
		for _, imp := range imps {
			switch {
			case imp == "internal/proxy", imp == "internal/config",
				(imp == "internal/store/sqlite" || imp == "internal/store/postgres" || imp == "internal/store/redis") && !strings.HasPrefix(pkg, "internal/store/"):
				t.Errorf("%s imports %s: only cmd/gateway may", pkg, imp)
			}
		}
	}
}

func TestDomainImportsOnlyStandardLibrary(t *testing.T) {
	out, err := exec.Command("go", "list", "-e", "-f", `{{join .Imports " "}}`, module+"internal/memory").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, imp := range strings.Fields(string(out)) {
		if strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
			t.Errorf("internal/memory imports %s: the domain package uses the standard library only", imp)
		}
	}
}
