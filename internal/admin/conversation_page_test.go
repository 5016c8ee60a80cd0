package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
	"github.com/memgate/memgate/internal/store/sqlite"
)

// longConversation opens a SQLite store holding conversation "long" of
// user "u" in the default tenant: exchanges exchanges (two messages each),
// every message about size bytes of text.
func longConversation(tb testing.TB, exchanges, size int) *sqlite.Store {
	tb.Helper()
	return conversationOf(tb, exchanges, strings.Repeat("a long message. ", size/16))
}

// conversationOf opens a SQLite store holding conversation "long" of
// user "u" in the default tenant: exchanges exchanges (two messages each),
// every message the exchange's number and text.
func conversationOf(tb testing.TB, exchanges int, text string) *sqlite.Store {
	tb.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "long.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	msg := func(role string, i int) memory.Message {
		raw, _ := json.Marshal(map[string]string{"role": role, "content": fmt.Sprintf("%d %s", i, text)})
		m, err := memory.ParseMessage(raw)
		if err != nil {
			tb.Fatal(err)
		}
		return m
	}
	id := memory.Identity{Tenant: memory.DefaultTenant, User: "u", Conversation: "long"}
	at := time.Now().Add(-time.Duration(exchanges) * time.Second)
	const batch = 500
	for i := 0; i < exchanges; i += batch {
		var exs []memory.Exchange
		for j := i; j < min(i+batch, exchanges); j++ {
			exs = append(exs, memory.Exchange{ID: fmt.Sprintf("ex-%d", j), Identity: id, Model: "m",
				Turn: []memory.Message{msg("user", j)}, Reply: msg("assistant", j), At: at.Add(time.Duration(j) * time.Second)})
		}
		if _, err := st.SaveExchanges(context.Background(), exs); err != nil {
			tb.Fatal(err)
		}
	}
	return st
}

// conversationHandler serves the management API over st, for loopback
// callers (no key configured).
func conversationHandler(tb testing.TB, st Store) http.Handler {
	tb.Helper()
	srv, err := server.New(prometheus.NewRegistry(), nil, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	New(nil, st, nil, nil, 1<<20, 0, slog.New(slog.DiscardHandler)).Register(srv)
	return srv.Handler()
}

// getConversation answers GET path through h from loopback.
func getConversation(h http.Handler, path string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.RemoteAddr = "127.0.0.1:5000"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// BenchmarkGetLongConversation: one GET of a conversation of 20,000
// messages of 2.5 KB (50 MB of text), as the management API answers it
// without paging parameters.
func BenchmarkGetLongConversation(b *testing.B) {
	benchGet(b, conversationHandler(b, longConversation(b, 10_000, 2_500)), "/v1/memory/conversations/long?user=u")
}

// benchGet measures GET path through h, with the answer's size.
func benchGet(b *testing.B, h http.Handler, path string) {
	b.ReportAllocs()
	var size int
	for b.Loop() {
		rec := getConversation(h, path)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		size = rec.Body.Len()
	}
	b.ReportMetric(float64(size), "resp-bytes")
}

// conversationAnswer is GET /v1/memory/conversations/{id}'s answer.
type conversationAnswer struct {
	Conversation memory.Conversation `json:"conversation"`
	Messages     []memory.Message    `json:"messages"`
	FirstID      *int64              `json:"first_id"`
	LastID       *int64              `json:"last_id"`
	HasMore      bool                `json:"has_more"`
}

func decodeConversation(tb testing.TB, rec *httptest.ResponseRecorder) conversationAnswer {
	tb.Helper()
	if rec.Code != http.StatusOK {
		tb.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var a conversationAnswer
	if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil {
		tb.Fatal(err)
	}
	return a
}

// TestConversationIsPaged: a conversation's messages come a page at a
// time (DefaultPageMessages without limit), walked forward with after
// and backward with before, each message once in Seq order, with
// first_id, last_id and has_more as OpenAI's lists give them. Before, the
// conversation came whole: 2,400 messages in one answer.
func TestConversationIsPaged(t *testing.T) {
	const total = 2_400
	h := conversationHandler(t, longConversation(t, total/2, 64))
	const base = "/v1/memory/conversations/long?user=u"

	first := decodeConversation(t, getConversation(h, base))
	if len(first.Messages) != DefaultPageMessages || !first.HasMore || first.Conversation.MessageCount != total {
		t.Fatalf("first page: %d messages, has_more %v, message_count %d; want %d, true, %d",
			len(first.Messages), first.HasMore, first.Conversation.MessageCount, DefaultPageMessages, total)
	}
	if *first.FirstID != first.Messages[0].Seq || *first.LastID != first.Messages[len(first.Messages)-1].Seq {
		t.Fatalf("first_id %d, last_id %d do not name the page's ends", *first.FirstID, *first.LastID)
	}

	walk := func(cursor string, from int64, forward bool) []int64 {
		var seqs []int64
		for pages := 0; ; pages++ {
			if pages > total {
				t.Fatal("paging does not end")
			}
			a := decodeConversation(t, getConversation(h, fmt.Sprintf("%s&limit=700&%s=%d", base, cursor, from)))
			var got []int64
			for _, m := range a.Messages {
				got = append(got, m.Seq)
			}
			if forward {
				seqs = append(seqs, got...)
			} else {
				seqs = append(got, seqs...)
			}
			if !a.HasMore {
				return seqs
			}
			if forward {
				from = *a.LastID
			} else {
				from = *a.FirstID
			}
		}
	}
	for name, seqs := range map[string][]int64{"after": walk("after", 0, true), "before": walk("before", total+1, false)} {
		if len(seqs) != total {
			t.Fatalf("paging %s: %d messages, want %d", name, len(seqs), total)
		}
		for i, s := range seqs {
			if s != int64(i+1) {
				t.Fatalf("paging %s: message %d has seq %d, want %d", name, i, s, i+1)
			}
		}
	}

	end := decodeConversation(t, getConversation(h, fmt.Sprintf("%s&after=%d", base, total)))
	if len(end.Messages) != 0 || end.HasMore || end.FirstID != nil || end.LastID != nil {
		t.Fatalf("past the end: %+v", end)
	}
	for _, q := range []string{"&limit=0", "&limit=1001", "&limit=x", "&after=-1", "&before=x", "&after=1&before=5"} {
		if rec := getConversation(h, base+q); rec.Code != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", q, rec.Code)
		}
	}
}

// TestConversationPageBounded: however long its messages, a page's answer
// stays near MaxPageBytes (one message at least), and has_more says the
// rest follow. Before, 24 messages of 512 KiB came in one 24 MiB answer.
func TestConversationPageBounded(t *testing.T) {
	walkBounded(t, conversationHandler(t, longConversation(t, 12, 512<<10)), 24, 64<<10)
}

// walkBounded walks the conversation of h forward in pages of
// MaxPageMessages, each answer at most slack past MaxPageBytes, and
// checks they held want messages.
func walkBounded(t *testing.T, h http.Handler, want, slack int) {
	t.Helper()
	var seen int
	for after := int64(0); ; {
		rec := getConversation(h, fmt.Sprintf("/v1/memory/conversations/long?user=u&limit=%d&after=%d", MaxPageMessages, after))
		if rec.Body.Len() > MaxPageBytes+slack {
			t.Fatalf("a page of %d bytes, want at most about %d", rec.Body.Len(), MaxPageBytes)
		}
		a := decodeConversation(t, rec)
		seen += len(a.Messages)
		if !a.HasMore {
			break
		}
		if len(a.Messages) == 0 {
			t.Fatal("an empty page says more follow")
		}
		after = *a.LastID
	}
	if seen != want {
		t.Fatalf("pages held %d messages, want %d", seen, want)
	}
}

// TestConversationPageBoundedEncoded: a page's bound is the size of its
// answer, escapes included: text of '<', '"' and control characters
// takes up to six times its bytes as JSON. Before, the bound counted the
// text's bytes: 30 messages of 64 KiB of such text came in a 6.7 MB page.
func TestConversationPageBoundedEncoded(t *testing.T) {
	walkBounded(t, conversationHandler(t, conversationOf(t, 30, strings.Repeat("<\"\x01", 64<<10/3))), 60, 4<<10)
}

// TestConversationBeforeZero: before=0 names the page before the first
// message: empty, with nothing more before it, as the end of a walk
// backward. Before, before=0 was no cursor and answered the first page,
// and a client walking backward to it looped.
func TestConversationBeforeZero(t *testing.T) {
	h := conversationHandler(t, longConversation(t, 20, 64))
	for _, before := range []string{"0", "1"} {
		a := decodeConversation(t, getConversation(h, "/v1/memory/conversations/long?user=u&limit=5&before="+before))
		if len(a.Messages) != 0 || a.HasMore || a.FirstID != nil || a.LastID != nil {
			t.Errorf("before=%s: %d messages, has_more %v; want none, false", before, len(a.Messages), a.HasMore)
		}
	}
}

// BenchmarkGetLongConversationPage: a page at the end of that
// conversation, the largest a request may ask for.
func BenchmarkGetLongConversationPage(b *testing.B) {
	benchGet(b, conversationHandler(b, longConversation(b, 10_000, 2_500)),
		fmt.Sprintf("/v1/memory/conversations/long?user=u&limit=%d&after=19000", MaxPageMessages))
}
