package tokens

import "strings"

// DefaultContextWindow is the context window assumed for a model that neither
// the built-in table nor the configured overrides know.
const DefaultContextWindow = 128000

// builtinWindows is the built-in model → context window table, matched by
// longest prefix. Configured windows override and extend it.
var builtinWindows = map[string]int{
	"gpt-4o":        128000,
	"gpt-4o-mini":   128000,
	"gpt-4.1":       1047576,
	"gpt-4-turbo":   128000,
	"gpt-4":         8192,
	"gpt-4-32k":     32768,
	"gpt-3.5-turbo": 16385,
	"o1":            200000,
	"o3":            200000,
	"o4-mini":       200000,
	"gpt-5":         400000,
}

// windowTable is an immutable model-prefix → window table.
type windowTable map[string]int

// newWindowTable merges the built-in table with overrides (overrides win).
func newWindowTable(overrides map[string]int) windowTable {
	t := make(windowTable, len(builtinWindows)+len(overrides))
	for k, v := range builtinWindows {
		t[k] = v
	}
	for k, v := range overrides {
		t[strings.ToLower(k)] = v
	}
	return t
}

// lookup returns the window of the longest key that prefixes model, or
// DefaultContextWindow when none does.
func (t windowTable) lookup(model string) int {
	if w, ok := t[model]; ok {
		return w
	}
	best, bestLen := DefaultContextWindow, -1
	for k, w := range t {
		if len(k) > bestLen && strings.HasPrefix(model, k) {
			best, bestLen = w, len(k)
		}
	}
	return best
}
