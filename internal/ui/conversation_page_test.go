package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/memgate/memgate/internal/admin"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/store/sqlite"
)

// addLongConversation stores conversation "long" of alice in tenant acme:
// exchanges exchanges, two messages each of about size bytes.
func addLongConversation(tb testing.TB, st *sqlite.Store, exchanges, size int) {
	tb.Helper()
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "long"}
	at := time.Now().Add(-time.Hour)
	pad := strings.Repeat("x", size)
	var exs []memory.Exchange
	for i := range exchanges {
		msg := func(role string) memory.Message {
			raw, _ := json.Marshal(map[string]string{"role": role, "content": fmt.Sprintf("%s %d %s", role, i, pad)})
			m, err := memory.ParseMessage(raw)
			if err != nil {
				tb.Fatal(err)
			}
			return m
		}
		exs = append(exs, memory.Exchange{ID: fmt.Sprintf("long-%d", i), Identity: id, Model: "m",
			Turn: []memory.Message{msg("user")}, Reply: msg("assistant"), At: at.Add(time.Duration(i) * time.Second)})
		if len(exs) == 500 || i == exchanges-1 {
			if _, err := st.SaveExchanges(context.Background(), exs); err != nil {
				tb.Fatal(err)
			}
			exs = exs[:0]
		}
	}
}

// TestConversationPageIsPaged: the inspector shows a long conversation a
// page of admin.DefaultPageMessages at a time, with links to the later
// and earlier pages that keep the tenant, and every message is on one
// page. Before, the page rendered all of them at once.
func TestConversationPageIsPaged(t *testing.T) {
	st := mustStore(t)
	const total = 250
	addLongConversation(t, st, total/2, 16)
	base := mustUI(t, st, adminGuard())
	c := browser(t)
	login(t, c, base, adminKey)

	seqs := regexp.MustCompile(`data-seq="(\d+)"`)
	link := func(body, rel string) string {
		m := regexp.MustCompile(`rel="` + rel + `" href="\?([^"#]*)#messages"`).FindStringSubmatch(body)
		if m == nil {
			return ""
		}
		return html.UnescapeString(m[1])
	}
	var seen []string
	var pages []string
	for q, n := "tenant=acme", 0; q != ""; n++ {
		if n > total {
			t.Fatal("the later links never end")
		}
		resp, body := do(t, c, "GET", base+"/ui/users/alice/conversations/long?"+q, nil)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", q, resp.StatusCode)
		}
		got := seqs.FindAllStringSubmatch(body, -1)
		if len(got) > admin.DefaultPageMessages {
			t.Fatalf("%s: %d messages on one page, want at most %d", q, len(got), admin.DefaultPageMessages)
		}
		for _, m := range got {
			seen = append(seen, m[1])
		}
		if n > 0 && link(body, "prev") == "" {
			t.Fatalf("%s: page %d has no link to the earlier messages", q, n)
		}
		pages = append(pages, body)
		q = link(body, "next")
		if q != "" && !strings.Contains(q, "tenant=acme") {
			t.Fatalf("the later link %q drops the tenant", q)
		}
	}
	if len(seen) != total || seen[0] != "1" || seen[total-1] != fmt.Sprint(total) {
		t.Fatalf("the pages showed %d messages (%v…), want %d from #1", len(seen), seen[:min(3, len(seen))], total)
	}
	if link(pages[0], "prev") != "" {
		t.Fatal("the first page links to earlier messages")
	}
	// The earlier link of the last page leads back to the page before it.
	resp, body := do(t, c, "GET", base+"/ui/users/alice/conversations/long?"+link(pages[len(pages)-1], "prev"), nil)
	if resp.StatusCode != 200 || len(seqs.FindAllString(body, -1)) != admin.DefaultPageMessages || link(body, "next") == "" {
		t.Fatalf("the earlier page: status %d, %d messages", resp.StatusCode, len(seqs.FindAllString(body, -1)))
	}
	if resp, _ := do(t, c, "GET", base+"/ui/users/alice/conversations/long?tenant=acme&limit=0", nil); resp.StatusCode != 400 {
		t.Fatalf("limit=0: status %d, want 400", resp.StatusCode)
	}
}

// BenchmarkConversationPage: the inspector's page of a conversation of
// 20,000 messages of 2.5 KB (50 MB of text).
func BenchmarkConversationPage(b *testing.B) {
	st := mustStore(b)
	addLongConversation(b, st, 10_000, 2_500)
	base := mustUI(b, st, adminGuard())
	c := browser(b)
	login(b, c, base, adminKey)
	b.ReportAllocs()
	var size int
	for b.Loop() {
		resp, body := do(b, c, "GET", base+"/ui/users/alice/conversations/long?tenant=acme", nil)
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		size = len(body)
	}
	b.ReportMetric(float64(size), "resp-bytes")
}

// TestBranchesCutOnlyWhenMoreExist: a conversation with exactly
// MaxBranchMessages superseded messages shows them all and says nothing
// is left out; one regeneration more and the page says older ones are
// kept. Before, exactly MaxBranchMessages read as cut.
func TestBranchesCutOnlyWhenMoreExist(t *testing.T) {
	st := mustStore(t)
	id := memory.Identity{Tenant: "acme", User: "alice", Conversation: "regen"}
	msg := func(role, text string) memory.Message {
		raw, _ := json.Marshal(map[string]string{"role": role, "content": text})
		m, err := memory.ParseMessage(raw)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	at := time.Now().Add(-time.Hour)
	// Each regeneration of the second answer supersedes the second
	// question and answer: two messages.
	regenerate := func(n int) {
		t.Helper()
		ex := memory.Exchange{ID: fmt.Sprintf("regen-%d", n), Identity: id, Model: "m",
			Prior: []memory.Message{msg("user", "q1"), msg("assistant", "a1")},
			Turn:  []memory.Message{msg("user", "q2")}, Reply: msg("assistant", fmt.Sprintf("a2 take %d", n)),
			At: at.Add(time.Duration(n) * time.Second)}
		if n == 0 {
			ex.Prior, ex.Turn, ex.Reply = nil, []memory.Message{msg("user", "q1")}, msg("assistant", "a1")
		}
		if _, err := st.SaveExchanges(context.Background(), []memory.Exchange{ex}); err != nil {
			t.Fatal(err)
		}
	}
	for n := 0; n <= MaxBranchMessages/2+1; n++ {
		regenerate(n)
	}
	base := mustUI(t, st, adminGuard())
	c := browser(t)
	login(t, c, base, adminKey)
	branchSeqs := func() (shown int, cut bool) {
		t.Helper()
		resp, body := do(t, c, "GET", base+"/ui/users/alice/conversations/regen?tenant=acme", nil)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		return strings.Count(body, "a2 take") - 1, strings.Contains(body, "older ones are kept too") // one is live
	}
	if shown, cut := branchSeqs(); shown != MaxBranchMessages/2 || cut {
		t.Fatalf("%d superseded messages: %d answers shown, cut %v; want %d, not cut", MaxBranchMessages, shown, cut, MaxBranchMessages/2)
	}
	regenerate(MaxBranchMessages/2 + 2)
	if shown, cut := branchSeqs(); shown != MaxBranchMessages/2 || !cut {
		t.Fatalf("%d superseded messages: %d answers shown, cut %v; want %d, cut", MaxBranchMessages+2, shown, cut, MaxBranchMessages/2)
	}
}
