package ui

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memgate/memgate/internal/admin"
	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
	"github.com/memgate/memgate/internal/store/sqlite"
)

// Compile-time checks: the stores serve the inspector.
var (
	_ Inspector     = (*sqlite.Store)(nil)
	_ Footprinter   = (*sqlite.Store)(nil)
	_ FactPinner    = (*sqlite.Store)(nil)
	_ SavingsReader = (*sqlite.Store)(nil)
)

// adminKey is the tests' admin key.
const adminKey = "sk-admin-test-key"

// secret is text seeded into the store that no unauthorised answer may hold.
const secret = "Porto-apartment-4417"

// recallStore adapts the SQLite store's facts to admin.Recall (no search).
type recallStore struct{ *sqlite.Store }

func (r recallStore) Facts(ctx context.Context, tenant, user string, history bool) ([]memory.Fact, error) {
	return r.Store.Facts(ctx, tenant, user, time.Now(), history)
}

func (r recallStore) AddFact(ctx context.Context, f memory.Fact) (memory.Fact, error) {
	return r.UpsertFact(ctx, f, 0)
}

func (r recallStore) Search(context.Context, string, string, string, int) ([]memory.Item, error) {
	return nil, nil
}

var _ admin.Recall = recallStore{}

// mustStore opens a SQLite store on a temp file seeded with one
// conversation of alice in tenant acme, holding hostile and redacted text,
// a tool call and an unpinned fact.
func mustStore(tb testing.TB) *sqlite.Store {
	tb.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "ui.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	msg := func(role, raw string) memory.Message {
		m, err := memory.ParseMessage(json.RawMessage(raw))
		if err != nil {
			tb.Fatal(err)
		}
		return m
	}
	ex := memory.Exchange{
		ID:       "req-1",
		Identity: memory.Identity{Tenant: "acme", User: "alice", Conversation: "trip"},
		Model:    "gpt-4o-mini",
		Turn:     []memory.Message{msg("user", `{"role":"user","content":"<script>alert('x')</script> my card is [redacted:card] and I live at `+secret+`"}`)},
		Reply:    msg("assistant", `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"lookup_city","arguments":"{\"city\":\"Porto\"}"}}]}`),
		At:       time.Now(),
	}
	if _, err := st.SaveExchange(context.Background(), ex); err != nil {
		tb.Fatal(err)
	}
	if _, err := st.UpsertFact(context.Background(), memory.Fact{Tenant: "acme", User: "alice", Type: memory.FactProfile,
		Key: "home", Value: secret, Confidence: 0.8}, 0); err != nil {
		tb.Fatal(err)
	}
	return st
}

// mustUI serves the inspector over st with guard and returns its base URL.
func mustUI(tb testing.TB, st *sqlite.Store, guard Guard) string {
	tb.Helper()
	hs := httptest.NewServer(uiHandler(tb, st, guard))
	tb.Cleanup(hs.Close)
	return hs.URL
}

// uiHandler returns the handler of a server with the inspector over st
// with guard.
func uiHandler(tb testing.TB, st *sqlite.Store, guard Guard) http.Handler {
	tb.Helper()
	srv, err := server.New(prometheus.NewRegistry(), nil, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	u, err := New(Deps{Guard: guard, Store: st, Inspect: st, Footprint: st, Recall: recallStore{st}, Pinner: st,
		Savings: st, Metrics: prometheus.NewRegistry()}, Options{}, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	u.Register(srv)
	return srv.Handler()
}

// browser is an HTTP client with a cookie jar that does not follow
// redirects.
func browser(tb testing.TB) *http.Client {
	tb.Helper()
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// do sends a request and returns the response with its body.
func do(tb testing.TB, c *http.Client, method, u string, form url.Values) (*http.Response, string) {
	tb.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		tb.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// login logs c in with key and fails the test unless it is accepted.
func login(tb testing.TB, c *http.Client, base, key string) {
	tb.Helper()
	resp, body := do(tb, c, "POST", base+"/ui/login", url.Values{"key": {key}})
	if resp.StatusCode != http.StatusSeeOther {
		tb.Fatalf("login: status %d: %s", resp.StatusCode, body)
	}
}

// csrfOf reads the CSRF token of a page's forms.
func csrfOf(tb testing.TB, page string) string {
	tb.Helper()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		tb.Fatalf("no csrf token in page")
	}
	return m[1]
}

// adminGuard accepts only adminKey (a gateway key configuration with keys
// would behave the same for other keys).
func adminGuard() Guard { return KeyGuard(identity.New(nil), identity.HashKey(adminKey)) }

func TestNoDataWithoutAValidKey(t *testing.T) {
	st := mustStore(t)
	base := mustUI(t, st, adminGuard())
	pages := []string{
		"/ui/users?tenant=acme", "/ui/users/alice?tenant=acme", "/ui/users/alice/conversations/trip?tenant=acme",
		"/ui/users/alice/facts?tenant=acme", "/ui/users/alice/preview?tenant=acme&q=where", "/ui/savings?tenant=acme",
		"/ui/users/alice/erased?tenant=acme",
	}
	clients := map[string]*http.Client{"no session": browser(t), "wrong key": browser(t), "forged cookie": browser(t)}
	if resp, body := do(t, clients["wrong key"], "POST", base+"/ui/login", url.Values{"key": {"sk-wrong"}}); resp.StatusCode != 401 || strings.Contains(body, secret) {
		t.Fatalf("wrong key login: status %d", resp.StatusCode)
	}
	u, _ := url.Parse(base + "/ui")
	clients["forged cookie"].Jar.SetCookies(u, []*http.Cookie{{Name: cookieName, Value: "forged", Path: "/ui"}})
	for name, c := range clients {
		t.Run(name, func(t *testing.T) {
			for _, p := range pages {
				resp, body := do(t, c, "GET", base+p, nil)
				if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/login") {
					t.Errorf("GET %s: status %d, Location %q; want a redirect to the login page", p, resp.StatusCode, resp.Header.Get("Location"))
				}
				if strings.Contains(body, secret) || strings.Contains(body, "alice") && !strings.Contains(p, "alice") {
					t.Errorf("GET %s leaked data: %s", p, body)
				}
			}
			resp, body := do(t, c, "GET", base+"/ui/users.json?tenant=acme", nil)
			if resp.StatusCode != 401 || strings.Contains(body, "alice") || !strings.Contains(body, `"error"`) {
				t.Errorf("users.json: status %d body %s", resp.StatusCode, body)
			}
			for _, p := range []string{"/ui/users/alice/erase?tenant=acme", "/ui/users/alice/facts/1/delete?tenant=acme", "/ui/users/alice/facts/1/pin?tenant=acme"} {
				resp, body := do(t, c, "POST", base+p, url.Values{"confirm": {"alice"}, "csrf": {"x"}})
				if resp.StatusCode != 401 || strings.Contains(body, secret) {
					t.Errorf("POST %s: status %d", p, resp.StatusCode)
				}
			}
		})
	}
	// Nothing changed.
	fp, err := st.Footprint(context.Background(), "acme", "alice")
	if err != nil || fp.Conversations != 1 || fp.Facts != 1 {
		t.Fatalf("store changed by unauthorised requests: %+v %v", fp, err)
	}
	facts, _ := st.Facts(context.Background(), "acme", "alice", time.Now(), false)
	if len(facts) != 1 || facts[0].Pinned {
		t.Fatalf("fact changed: %+v", facts)
	}
}

func TestPagesEscapeContentAndShowPlaceholders(t *testing.T) {
	st := mustStore(t)
	base := mustUI(t, st, adminGuard())
	c := browser(t)
	login(t, c, base, adminKey)
	resp, body := do(t, c, "GET", base+"/ui/users/alice/conversations/trip?tenant=acme", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if strings.Contains(body, "<script>alert") {
		t.Errorf("message content rendered as markup:\n%s", body)
	}
	if !strings.Contains(body, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;") {
		t.Errorf("message content not shown as text:\n%s", body)
	}
	if !strings.Contains(body, `<mark class="redacted" title="a secret memgate replaced before storing">[redacted:card]</mark>`) {
		t.Errorf("redaction placeholder not marked:\n%s", body)
	}
	if !strings.Contains(body, `<span class="fn">lookup_city</span>`) || !strings.Contains(body, "&#34;city&#34;: &#34;Porto&#34;") {
		t.Errorf("tool call not readable:\n%s", body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
}

func TestFactActionsNeedTheSessionsToken(t *testing.T) {
	st := mustStore(t)
	base := mustUI(t, st, adminGuard())
	c := browser(t)
	login(t, c, base, adminKey)
	_, page := do(t, c, "GET", base+"/ui/users/alice/facts?tenant=acme", nil)
	facts, _ := st.Facts(context.Background(), "acme", "alice", time.Now(), false)
	pin := base + "/ui/users/alice/facts/" + itoa(facts[0].ID) + "/pin?tenant=acme"

	if resp, _ := do(t, c, "POST", pin, url.Values{"csrf": {"not-the-token"}}); resp.StatusCode != 403 {
		t.Errorf("pin with a wrong token: status %d, want 403", resp.StatusCode)
	}
	req, _ := http.NewRequest("POST", pin, strings.NewReader(url.Values{"csrf": {csrfOf(t, page)}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	if resp, err := c.Do(req); err != nil || resp.StatusCode != 403 {
		t.Errorf("pin from another origin: %v %v, want 403", resp.StatusCode, err)
	}
	if got, _ := st.Facts(context.Background(), "acme", "alice", time.Now(), false); got[0].Pinned {
		t.Fatal("pinned without a valid token")
	}
	if resp, _ := do(t, c, "POST", pin, url.Values{"csrf": {csrfOf(t, page)}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("pin: status %d", resp.StatusCode)
	}
	if got, _ := st.Facts(context.Background(), "acme", "alice", time.Now(), false); !got[0].Pinned {
		t.Fatal("not pinned")
	}
	_, page = do(t, c, "GET", base+"/ui/users/alice/facts?tenant=acme", nil)
	if !strings.Contains(page, `<span class="badge pin">pinned</span>`) || !strings.Contains(page, ">Unpin<") {
		t.Errorf("facts page does not show the pin:\n%s", page)
	}
	unpin := strings.Replace(pin, "/pin?", "/unpin?", 1)
	if resp, _ := do(t, c, "POST", unpin, url.Values{"csrf": {csrfOf(t, page)}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("unpin: status %d", resp.StatusCode)
	}
	if got, _ := st.Facts(context.Background(), "acme", "alice", time.Now(), false); got[0].Pinned {
		t.Fatal("still pinned after unpin")
	}
}

func TestEraseNeedsConfirmation(t *testing.T) {
	st := mustStore(t)
	base := mustUI(t, st, adminGuard())
	c := browser(t)
	login(t, c, base, adminKey)
	_, page := do(t, c, "GET", base+"/ui/users/alice?tenant=acme", nil)
	erase := base + "/ui/users/alice/erase?tenant=acme"
	if resp, _ := do(t, c, "POST", erase, url.Values{"csrf": {csrfOf(t, page)}, "confirm": {"bob"}}); resp.StatusCode != 400 {
		t.Fatalf("erase with a wrong confirmation: status %d", resp.StatusCode)
	}
	if fp, _ := st.Footprint(context.Background(), "acme", "alice"); fp.Empty() {
		t.Fatal("erased without confirmation")
	}
	resp, _ := do(t, c, "POST", erase, url.Values{"csrf": {csrfOf(t, page)}, "confirm": {"alice"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("erase: status %d", resp.StatusCode)
	}
	_, after := do(t, c, "GET", base+resp.Header.Get("Location"), nil)
	if !strings.Contains(after, `id="erased"`) || strings.Contains(after, secret) {
		t.Errorf("after erasure:\n%s", after)
	}
	if fp, _ := st.Footprint(context.Background(), "acme", "alice"); !fp.Empty() {
		t.Errorf("footprint after erasure %+v", fp)
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestFactsPageSaysWhyAPinIsPinned: a pin shows the rule that pinned it
// and the message that stated it, linked to its conversation; a pin whose
// message is gone says so; a pin with no rule says it was set by hand or
// by a model.
func TestFactsPageSaysWhyAPinIsPinned(t *testing.T) {
	st := mustStore(t)
	ctx := context.Background()
	ex := memory.Exchange{ID: "req-2", Identity: memory.Identity{Tenant: "acme", User: "alice", Conversation: "trip"}, Model: "gpt-4o-mini",
		Turn:  []memory.Message{{Role: "user", Content: "By the way I'm allergic to shellfish"}},
		Reply: memory.Message{Role: "assistant", Content: "Noted."}, At: time.Now()}
	res, err := st.SaveExchange(ctx, ex)
	if err != nil {
		t.Fatal(err)
	}
	key := res.Stored[0].Key
	for _, f := range []memory.Fact{
		{Type: memory.FactLimit, Key: "allergy", Value: "I'm allergic to shellfish", Rule: "allergy", Source: key},
		{Type: memory.FactGoal, Key: "savings", Value: "save R$ 5.000", Rule: "goal", Source: "req-0:9"},
		{Type: memory.FactPreference, Key: "tone", Value: "short answers"},
	} {
		f.Tenant, f.User, f.Conversation, f.Pinned, f.Confidence = "acme", "alice", "trip", true, 0.9
		if f.Source == "" {
			f.Conversation = ""
		}
		if _, err := st.UpsertFact(ctx, f, 0); err != nil {
			t.Fatal(err)
		}
	}
	base := mustUI(t, st, adminGuard())
	c := browser(t)
	login(t, c, base, adminKey)
	_, page := do(t, c, "GET", base+"/ui/users/alice/facts?tenant=acme", nil)
	for _, want := range []string{
		`by rule “allergy”`,
		`stated in <a href="/ui/users/alice/conversations/trip?tenant=acme#m` + itoa(res.Stored[0].Seq) + `">`,
		`“By the way I&#39;m allergic to shellfish”`,
		`by rule “goal”`,
		`in a message no longer stored`,
		`by hand or by a model`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("facts page lacks %q:\n%s", want, page)
		}
	}
}

// TestSavingsShowsThePromptCache: the savings view shows, beside tokens
// saved, the prompt tokens that repeat the previous request's prefix and
// those the provider read from its cache, with their shares of tokens sent.
func TestSavingsShowsThePromptCache(t *testing.T) {
	st := mustStore(t)
	if err := st.AddSavings(context.Background(), []memory.SavingsBucket{{Tenant: "acme", Start: time.Now().UTC().Truncate(5 * time.Minute),
		Requests: 4, TokensOriginal: 20000, TokensSent: 8000, TokensRepeated: 6000, TokensCached: 4000}}); err != nil {
		t.Fatal(err)
	}
	base := mustUI(t, st, adminGuard())
	c := browser(t)
	login(t, c, base, adminKey)
	resp, page := do(t, c, http.MethodGet, base+"/ui/savings?tenant=acme", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for _, want := range []string{`id="prompt-cache"`, "6,000", "75", "4,000", "50"} {
		if !strings.Contains(page, want) {
			t.Errorf("savings page lacks %q", want)
		}
	}
}

// TestUsersSearchFindsABodyUserByItsValue: a user an app named in the
// body's user field with a value that is not an id ("John Smith") is
// stored as memory.BodyUserID's digest; typing the app's value in the
// inspector's search finds that user, so an operator can open and erase
// it without computing the digest.
func TestUsersSearchFindsABodyUserByItsValue(t *testing.T) {
	st := mustStore(t)
	digest := memory.BodyUserID("John Smith")
	m, err := memory.ParseMessage(json.RawMessage(`{"role":"user","content":"hello"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.SaveExchange(context.Background(), memory.Exchange{ID: "req-js", Model: "m", At: time.Now(),
		Identity: memory.Identity{Tenant: "acme", User: digest, Conversation: "c"}, Turn: []memory.Message{m},
		Reply: memory.Message{Role: "assistant", Content: "hi", Raw: json.RawMessage(`{"role":"assistant","content":"hi"}`)}}); err != nil {
		t.Fatal(err)
	}
	base := mustUI(t, st, adminGuard())
	c := browser(t)
	login(t, c, base, adminKey)
	for _, q := range []string{"John Smith", digest} {
		resp, body := do(t, c, "GET", base+"/ui/users.json?tenant=acme&q="+url.QueryEscape(q), nil)
		var got struct {
			Data []struct {
				User string `json:"user"`
			} `json:"data"`
		}
		if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &got) != nil || len(got.Data) != 1 || got.Data[0].User != digest {
			t.Errorf("search %q: %d %s, want the user %s", q, resp.StatusCode, body, digest)
		}
	}
}

// TestLoginWithoutKeysSaysLeaveItEmpty: a gateway with no key configured
// lets loopback clients in with any key, an empty one included; its login
// page says so, or a newcomer who ran `make run` looks for a key that does
// not exist.
func TestLoginWithoutKeysSaysLeaveItEmpty(t *testing.T) {
	base := mustUI(t, mustStore(t), KeyGuard(identity.New(nil), ""))
	c := browser(t)
	resp, page := do(t, c, "GET", base+"/ui/login", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "no key configured") || !strings.Contains(page, "leave it empty") {
		t.Fatalf("login page (%d) does not tell a gateway without keys to leave the key empty:\n%s", resp.StatusCode, page)
	}
	login(t, c, base, "")
	if resp, _ := do(t, c, "GET", base+"/ui/users", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("after an empty key's login, /ui/users answers %d", resp.StatusCode)
	}
}
