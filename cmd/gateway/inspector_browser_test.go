package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/memgate/memgate/internal/identity"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/upstreamtest"
)

// inspectorAdminKey is the admin key of the browser test's gateway.
const inspectorAdminKey = "sk-admin-inspector-test"

// inspectorUpstream is the fake model behind the browser test: compaction
// requests get a valid summary, fact extraction finds the user's sister,
// a question about the weather is answered with a tool call, and every
// other chat completion with "ack: <last user text>".
func inspectorUpstream() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			Messages       []json.RawMessage `json:"messages"`
			ResponseFormat *struct {
				Type string `json:"type"`
			} `json:"response_format"`
		}
		json.Unmarshal(body, &req)
		var first, last string
		for i, raw := range req.Messages {
			m, err := memory.ParseMessage(raw)
			if err != nil {
				continue
			}
			if i == 0 {
				first = m.Content
			}
			if m.Role == "user" {
				last = m.Content
			}
		}
		switch {
		case req.ResponseFormat != nil && strings.HasPrefix(first, "You extract durable facts"):
			facts := `{"facts": []}`
			if strings.Contains(last, "Ana") {
				facts = `{"facts": [{"type": "relationship", "key": "sister", "value": "my sister Ana lives in Tokyo", "confidence": 0.9}]}`
			}
			upstreamtest.Chat(upstreamtest.Reply{Content: facts}).ServeHTTP(w, r)
		case req.ResponseFormat != nil:
			upstreamtest.Chat(upstreamtest.Reply{Content: fakeSummary(req.Messages)}).ServeHTTP(w, r)
		case strings.Contains(last, "weather"):
			upstreamtest.Chat(upstreamtest.Reply{ToolCalls: []upstreamtest.ToolCall{
				{ID: "call_weather_1", Name: "get_weather", Arguments: `{"city":"Lisbon","unit":"celsius"}`},
			}}).ServeHTTP(w, r)
		default:
			upstreamtest.Chat(upstreamtest.Reply{Content: "ack: " + last}).ServeHTTP(w, r)
		}
	})
}

// serveInspectorGateway runs `gateway serve` in-process with an admin key
// and eager compaction, in front of up, and returns its base URL.
func serveInspectorGateway(t *testing.T, up string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`listen: 127.0.0.1:0
admin_key: %s
upstream:
  base_url: %s
  api_key: sk-upstream-test
store:
  sqlite_path: %s
memory:
  load_timeout: 10s
compaction:
  max_messages: 4
  keep_messages: 2
`, identity.HashKey(inspectorAdminKey), up, filepath.Join(dir, "memgate.db"))
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	base, _ := mustServeEnv(t, map[string]string{"GATEWAY_CONFIG": path})
	return base
}

// seedChat sends one chat turn for maria's trip-2026 conversation.
func seedChat(t *testing.T, base, text string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "messages": []map[string]string{{"role": "user", "content": text}}})
	req, _ := http.NewRequest("POST", base+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("X-Memory-User", "maria")
	req.Header.Set("X-Memory-Conversation", "trip-2026")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("chat: status %d: %s", resp.StatusCode, b)
	}
}

// chromiumPath finds the Chromium binary; the browser test fails without it
// (make services installs it).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium binary on PATH: run `make services` (it installs Debian's chromium package)")
	return ""
}

// browserContext starts headless Chromium for the test.
func browserContext(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	// Accept the confirmation dialogs of the erase and delete forms, from
	// another goroutine than the one reading the events.
	opening := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range opening {
			if err != nil {
				return
			}
			go chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				_, err := cdp.Call(ctx, tg, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
				return err
			}))
		}
	}()
	return ctx
}

// shoot saves a full-page screenshot of the current page as name.png in
// the test's temp dir, and in $MEMGATE_UI_SCREENSHOTS when set (how the
// README's screenshots are made).
func shoot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dirs := []string{dir}
	if d := os.Getenv("MEMGATE_UI_SCREENSHOTS"); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// textOf returns the visible text of the first element sel matches.
// textOf returns the text of the element sel selects, waiting up to 30s for
// one to be there: on a busy machine a page can still be replacing its
// document (a form's redirect) when the element was first seen, and a node
// seen in the old document is gone from the new one.
func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[*string](`(() => { const e = document.querySelector(`+strconv.Quote(sel)+`); return e ? e.innerText : null; })()`))
		if err == nil && s != nil {
			return *s
		}
		if time.Now().After(deadline) {
			t.Fatalf("text of %s: %v (element present: %v)", sel, err, s != nil)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitFor reloads u until the JavaScript condition cond holds.
func waitFor(t *testing.T, ctx context.Context, u, cond, what string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := chromedp.Do(ctx, chromedp.Navigate(u)); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](cond))
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within 60s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// pinnedSection returns the pinned facts section of the memory block shown
// on the preview page ("" when the block has none).
func pinnedSection(t *testing.T, ctx context.Context) string {
	t.Helper()
	block, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector("#assembled .part-memory pre") || {textContent: ""}).textContent`))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(block, "Pinned")
	if !ok {
		return ""
	}
	sec, _, _ := strings.Cut(rest, "\n\n")
	return sec
}

// TestInspectorInBrowser drives the web inspector in headless Chromium
// against a gateway seeded through the chat API: log in with the admin key,
// read the conversation and its summary, pin a fact and see it in what the
// model sees, and erase the user.
func TestInspectorInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test: skipped under -short")
	}
	up := httptest.NewServer(inspectorUpstream())
	t.Cleanup(up.Close)
	base := serveInspectorGateway(t, up.URL+"/v1")
	for _, text := range []string{
		"Hi! I live in Porto and the trip to Japan is on 2026-04-03 for 12 days.",
		"My card is 4111 1111 1111 1111, can you hold the hotel in Kyoto?",
		"Why does my site show <script>window.__pwned = 1</script> as text?",
		"I moved to Lisbon last month, so the flight leaves from LIS.",
		"What's the weather in Lisbon today?",
		"My sister Ana lives in Tokyo; we meet on day 3.",
	} {
		seedChat(t, base, text)
	}

	ctx := browserContext(t)
	shots := t.TempDir()
	tenant := "?tenant=" + memory.DefaultTenant

	// Log in: a wrong key is refused, the admin key is accepted.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/ui/users"+tenant),
		chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), "sk-wrong"),
		chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#login-error")),
	); err != nil {
		t.Fatalf("wrong key: %v", err)
	}
	shoot(t, ctx, shots, "login")
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS("#key"), inspectorAdminKey),
		chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#users")),
	); err != nil {
		t.Fatalf("log in: %v", err)
	}
	if got := textOf(t, ctx, "#users tbody"); !strings.Contains(got, "maria") {
		t.Fatalf("users page lists %q, want maria", got)
	}
	shoot(t, ctx, shots, "users")

	// The conversation: live messages in order, the redaction placeholder,
	// the tool call, the hostile text as text, and the summary.
	conv := base + "/ui/users/maria/conversations/trip-2026" + tenant
	waitFor(t, ctx, conv, `document.querySelector("#summary-v1") !== null`, "the first summary")
	msgs := textOf(t, ctx, "#messages")
	for _, want := range []string{"I live in Porto", "[redacted:card]", "get_weather", `"city": "Lisbon"`,
		"<script>window.__pwned = 1</script>", "My sister Ana lives in Tokyo"} {
		if !strings.Contains(msgs, want) {
			t.Errorf("conversation page lacks %q:\n%s", want, msgs)
		}
	}
	if strings.Index(msgs, "I live in Porto") > strings.Index(msgs, "My sister Ana") {
		t.Error("messages out of order")
	}
	if pwned, err := chromedp.Run(ctx, chromedp.Evaluate[string](`typeof window.__pwned`)); err != nil || pwned != "undefined" {
		t.Errorf("message content ran as script: typeof window.__pwned = %q (%v)", pwned, err)
	}
	if sum := textOf(t, ctx, "#summary-v1"); !strings.Contains(sum, "model summary") || !strings.Contains(sum, "MODEL SUMMARY") || !strings.Contains(sum, "messages #1–#") {
		t.Errorf("summary v1 shows %q", sum)
	}
	shoot(t, ctx, shots, "conversation")

	// Facts: the city moved (Porto replaced by Lisbon); the sister is not
	// pinned yet, so the model does not see her among the pinned facts.
	facts := base + "/ui/users/maria/facts" + tenant
	waitFor(t, ctx, facts, `document.querySelector('tr.fact[data-key="sister"]') !== null`, "the extracted fact")
	if got := textOf(t, ctx, "#facts"); !strings.Contains(got, "Lisbon") || !strings.Contains(got, "replaced") || !strings.Contains(got, "Porto") {
		t.Errorf("facts page does not show the city's history:\n%s", got)
	}
	preview := func() {
		t.Helper()
		if err := chromedp.Do(ctx,
			chromedp.Navigate(base+"/ui/users/maria/preview"+tenant),
			chromedp.WaitVisible(chromedp.CSS("#question")),
			chromedp.SendKeys(chromedp.CSS("#question"), "Who do I meet in Tokyo?"),
			chromedp.SetValue(chromedp.CSS("#conversation"), "trip-2026"),
			chromedp.Click(chromedp.CSS("#preview")),
			chromedp.WaitVisible(chromedp.CSS("#assembled")),
		); err != nil {
			t.Fatalf("preview: %v", err)
		}
	}
	preview()
	if sec := pinnedSection(t, ctx); strings.Contains(sec, "Ana") {
		t.Fatalf("the sister is pinned before the pin: %q", sec)
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(facts),
		chromedp.Click(chromedp.CSS(`tr.fact[data-key="sister"] button.pin`)),
		chromedp.WaitVisible(chromedp.CSS(`tr.fact.pinned[data-key="sister"]`)),
	); err != nil {
		t.Fatalf("pin: %v", err)
	}
	shoot(t, ctx, shots, "facts")
	preview()
	if sec := pinnedSection(t, ctx); !strings.Contains(sec, "my sister Ana lives in Tokyo") {
		t.Errorf("after pinning, the pinned section is %q", sec)
	}
	if parts := textOf(t, ctx, `#parts tr[data-part="pinned"] td.n`); parts == "0" {
		t.Error("the pinned part has no tokens")
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("#budget svg.bar rect.p-pinned"))); err != nil {
		t.Errorf("no pinned segment on the budget bar: %v", err)
	}
	shoot(t, ctx, shots, "preview")

	// Savings and health, from the stored counters.
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/ui/savings"+tenant), chromedp.WaitVisible(chromedp.CSS("#savings-chart"))); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, "#totals"); !strings.HasPrefix(got, "6 requests") {
		t.Errorf("savings totals %q, want the 6 seeded requests", got)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("#savings-chart rect.sent"))); err != nil {
		t.Errorf("no bar on the savings chart: %v", err)
	}
	shoot(t, ctx, shots, "savings")

	// Erase the user, confirming, and see that nothing is left.
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/ui/users/maria"+tenant),
		chromedp.WaitVisible(chromedp.CSS("#erase-confirm")),
		chromedp.SendKeys(chromedp.CSS("#erase-confirm"), "maria"),
		chromedp.Click(chromedp.CSS("#erase")),
		chromedp.WaitVisible(chromedp.CSS("#erased")),
	); err != nil {
		t.Fatalf("erase: %v", err)
	}
	if got := textOf(t, ctx, "#erased"); !strings.Contains(got, "Nothing of maria is left") {
		t.Errorf("erased page says %q", got)
	}
	counts, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#footprint td, #left td")].map(td => td.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) < 9 {
		t.Fatalf("erased page shows %d counts", len(counts))
	}
	for _, c := range counts {
		if c != "0" {
			t.Errorf("after erasure a count is %q: %v", c, counts)
		}
	}
	shoot(t, ctx, shots, "erased")
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/ui/users"+tenant), chromedp.WaitVisible(chromedp.CSS("#users"))); err != nil {
		t.Fatal(err)
	}
	if got := textOf(t, ctx, "#users tbody"); strings.Contains(got, "maria") {
		t.Errorf("maria still listed: %q", got)
	}
	for _, name := range []string{"login", "users", "conversation", "facts", "preview", "savings", "erased"} {
		if fi, err := os.Stat(filepath.Join(shots, name+".png")); err != nil || fi.Size() == 0 {
			t.Errorf("screenshot %s: %v", name, err)
		}
	}
}
