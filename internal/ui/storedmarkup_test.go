package ui

import (
	"context"
	"strings"
	"testing"

	"github.com/memgate/memgate/internal/memory"
)

// TestFactsPageEscapesStoredText: a fact whose key and value were written
// to break out of an attribute or open a script (stored text from a
// user's message) is shown on the facts page and the user's page as
// text, never as markup.
func TestFactsPageEscapesStoredText(t *testing.T) {
	st := mustStore(t)
	if _, err := st.UpsertFact(context.Background(), memory.Fact{Tenant: "acme", User: "alice", Type: memory.FactPreference,
		Key: `x"><img src=x onerror=alert(1)>`, Value: `<script>alert(2)</script>' onmouseover='alert(3)`, Confidence: 0.8, Pinned: true}, 0); err != nil {
		t.Fatal(err)
	}
	base := mustUI(t, st, adminGuard())
	c := browser(t)
	login(t, c, base, adminKey)
	for _, page := range []string{"/ui/users/alice/facts?tenant=acme", "/ui/users/alice?tenant=acme"} {
		resp, body := do(t, c, "GET", base+page, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d: %s", page, resp.StatusCode, body)
		}
		for _, markup := range []string{"<img src=x", "<script>alert(2)", "onmouseover='alert"} {
			if strings.Contains(body, markup) {
				t.Errorf("%s: stored text rendered as markup (%q):\n%s", page, markup, body)
			}
		}
	}
	_, body := do(t, c, "GET", base+"/ui/users/alice/facts?tenant=acme", nil)
	if !strings.Contains(body, "&lt;script&gt;alert(2)&lt;/script&gt;") {
		t.Errorf("the fact's value is not shown as text:\n%s", body)
	}
}
