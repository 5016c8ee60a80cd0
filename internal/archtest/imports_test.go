// Package archtest guards memgate's import graph: the layering in
// shared/STYLE.md fails the build when a package imports what it must not.
package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/memgate/memgate/"

// rules maps a package (relative to the module) to internal packages it must
// never import, directly or indirectly.
var rules = map[string][]string{
	"internal/memory":  {"internal/"},
	"internal/lexicon": {"internal/"},
	"internal/vec":     {"internal/"},
	// telemetry is imported by the memory path and the stores: it must stay a leaf.
	"internal/telemetry": {"internal/"},
	"internal/encoder":   {"internal/"},
	// contract is the stores' shared non-SQL rules: it sees the domain only.
	"internal/store/contract": {"internal/proxy", "internal/engine", "internal/itemindex", "internal/store/sqlite", "internal/store/postgres", "internal/store/redis"},
	"internal/itemindex":      {"internal/proxy", "internal/engine/prompt", "internal/engine/recall", "internal/engine/record", "internal/engine/enrich", "internal/store/sqlite", "internal/store/postgres", "internal/store/redis"},
	"internal/store/sqlite":   {"internal/proxy", "internal/engine/prompt", "internal/engine/recall", "internal/engine/record", "internal/engine/enrich"},
	"internal/store/postgres": {"internal/proxy", "internal/engine/prompt", "internal/engine/recall", "internal/engine/record", "internal/engine/enrich"},
	"internal/store/redis":    {"internal/proxy", "internal/engine/prompt", "internal/engine/recall", "internal/engine/record", "internal/engine/enrich"},
	"internal/engine/prompt":  {"internal/proxy", "internal/store/sqlite", "internal/store/postgres", "internal/store/redis"},
	// record is the durable write path: replies reach it parsed, as domain
	// messages, so it never imports a dialect adapter.
	"internal/engine/record": {"internal/proxy", "internal/engine/prompt", "internal/store/sqlite", "internal/store/postgres", "internal/store/redis", "internal/dialect"},
	"internal/engine/recall": {"internal/proxy", "internal/engine/prompt", "internal/store/sqlite", "internal/store/postgres", "internal/store/redis"},
	"internal/engine/enrich": {"internal/proxy", "internal/engine/prompt", "internal/store/sqlite", "internal/store/postgres", "internal/store/redis"},
	"internal/tokens":        {"internal/proxy", "internal/engine/prompt", "internal/engine/record"},
	// internal/ui reads through internal/admin, whose import route stores through internal/engine/record.
	"internal/ui":                {"internal/proxy", "internal/engine/prompt", "internal/engine/recall", "internal/engine/enrich", "internal/store/sqlite", "internal/store/postgres", "internal/store/redis"},
	"internal/savings":           {"internal/proxy", "internal/engine/prompt", "internal/engine/record", "internal/store/sqlite", "internal/store/postgres", "internal/store/redis"},
	"internal/dialect/anthropic": {"internal/proxy", "internal/engine/prompt", "internal/engine/record", "internal/engine/recall", "internal/store/sqlite", "internal/store/postgres", "internal/store/redis"},
	// tracing wraps the memory core's two sides by their methods alone.
	"internal/tracing":           {"internal/proxy", "internal/engine/prompt", "internal/engine/record", "internal/engine/recall", "internal/store/sqlite", "internal/store/postgres", "internal/store/redis"},
	"internal/dialect/chat":      {"internal/proxy", "internal/apierr", "internal/engine", "internal/store"},
	"internal/dialect/responses": {"internal/proxy", "internal/engine/prompt", "internal/engine/record", "internal/engine/recall", "internal/store/sqlite", "internal/store/postgres", "internal/store/redis"},
}

// deps lists every package of the module with its transitive dependencies.
func deps(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-e", "-f", `{{.ImportPath}} {{join .Deps " "}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		m[strings.TrimPrefix(f[0], module)] = f[1:]
	}
	return m
}

func TestImportGraph(t *testing.T) {
	all := deps(t)
	for pkg, forbidden := range rules {
		ds, ok := all[pkg]
		if !ok {
			continue // not written yet
		}
		for _, d := range ds {
			rel, internal := strings.CutPrefix(d, module)
			if !internal {
				continue
			}
			for _, f := range forbidden {
				if rel == f || strings.HasPrefix(rel, f) && (strings.HasSuffix(f, "/") || strings.HasPrefix(rel, f+"/")) {
					t.Errorf("%s imports %s, which it must not", pkg, rel)
				}
			}
		}
	}
	for pkg, ds := range all {
		if pkg == "cmd/gateway" || strings.HasPrefix(pkg, "internal/proxy") {
			continue
		}
		for _, d := range ds {
			if d == module+"internal/proxy" {
				t.Errorf("%s imports internal/proxy: only cmd/gateway may", pkg)
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
