package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
)

// page is what the layout renders around a page's content.
type page struct {
	Title  string
	Tenant string
	// User is the user the page is about ("" for tenant-wide pages).
	User string
	// CSRF is the session's token for the page's forms.
	CSRF string
	// Nav names the active navigation entry.
	Nav  string
	Data any
}

// parsePages parses each page template together with the layout.
func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("ui: list templates: %w", err)
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		base := strings.TrimSuffix(path.Base(n), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("ui: parse %s: %w", n, err)
		}
		pages[base] = t
	}
	return pages, nil
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"segments": segments,
	"when":     when,
	"q":        url.PathEscape,
	"qs":       url.QueryEscape,
	"pct":      func(f float64) string { return fmt.Sprintf("%.0f%%", f*100) },
	"conf":     func(f float64) string { return fmt.Sprintf("%.2f", f) },
	"thousands": func(n int64) string {
		s := fmt.Sprint(n)
		for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
			s = s[:i] + "," + s[i:]
		}
		return s
	},
}

// when formats a time for a page (UTC, to the second), "—" for zero.
func when(t any) string {
	switch v := t.(type) {
	case time.Time:
		if v.IsZero() {
			return "—"
		}
		return v.UTC().Format("2006-01-02 15:04:05 UTC")
	case *time.Time:
		if v == nil {
			return "—"
		}
		return when(*v)
	}
	return ""
}

// render writes page name with p, filling the tenant and CSRF token from
// the request's session.
func (u *UI) render(c echo.Context, status int, name string, p page) error {
	t := u.pages[name]
	if t == nil {
		return fmt.Errorf("ui: no page %q", name)
	}
	if p.Tenant == "" {
		p.Tenant = tenantOf(c)
	}
	if ss := sessionIn(c); ss != nil {
		p.CSRF = ss.csrf
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, p); err != nil {
		u.log.Error("ui: render page", "page", name, "request_id", server.RequestID(c), "error", err)
		return c.String(http.StatusInternalServerError, "The page could not be rendered.")
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// renderError answers with an error page that holds nothing but msg.
func (u *UI) renderError(c echo.Context, status int, msg string) error {
	return u.render(c, status, "error", page{Title: http.StatusText(status), Data: msg})
}

// storeFailed logs a store error and answers with a 503 page.
func (u *UI) storeFailed(c echo.Context, err error) error {
	u.log.Error("ui: memory store error", "request_id", server.RequestID(c), "error", err)
	return u.renderError(c, http.StatusServiceUnavailable, "The memory store could not be reached.")
}

// segment is a run of text, or a redaction placeholder shown as one.
type segment struct {
	Text     string
	Redacted bool
}

// placeholder matches the typed placeholders capture stores in place of
// secrets ("[redacted:card]").
var placeholder = regexp.MustCompile(`\[redacted:[A-Za-z0-9_.-]+\]`)

// segments splits s into text and redaction placeholders.
func segments(s string) []segment {
	var out []segment
	last := 0
	for _, m := range placeholder.FindAllStringIndex(s, -1) {
		if m[0] > last {
			out = append(out, segment{Text: s[last:m[0]]})
		}
		out = append(out, segment{Text: s[m[0]:m[1]], Redacted: true})
		last = m[1]
	}
	if last < len(s) {
		out = append(out, segment{Text: s[last:]})
	}
	return out
}

// messageView is a stored message as a page shows it.
type messageView struct {
	Seq        int64
	Role       string
	Name       string
	Text       string
	ToolCalls  []toolCallView
	ToolCallID string
	Tokens     int
	CreatedAt  time.Time
	// Part is the prompt part a previewed message belongs to.
	Part string
}

// toolCallView is one tool call of an assistant message.
type toolCallView struct {
	ID, Name, Arguments string
}

// rawMessage is what a page reads of a message's raw JSON.
type rawMessage struct {
	Content    json.RawMessage   `json:"content"`
	Name       string            `json:"name"`
	ToolCallID string            `json:"tool_call_id"`
	Refusal    string            `json:"refusal"`
	Reasoning  string            `json:"reasoning_content"`
	ToolCalls  []memory.ToolCall `json:"tool_calls"`
}

// viewMessage reads a stored message for display: its text (content parts
// joined, refusal included), tool calls with pretty-printed arguments.
func viewMessage(m memory.Message) messageView {
	v := messageView{Seq: m.Seq, Role: m.Role, Text: m.Content, Tokens: m.Tokens, CreatedAt: m.CreatedAt}
	var raw rawMessage
	if len(m.Raw) == 0 || json.Unmarshal(m.Raw, &raw) != nil {
		return v
	}
	v.Name, v.ToolCallID = raw.Name, raw.ToolCallID
	if len(raw.ToolCalls) == 0 {
		return v
	}
	// Content holds the text projection with "[tool_call ...]" lines; show
	// the text alone and the calls apart.
	parsed, err := memory.ParseMessage(withoutToolCalls(m.Raw))
	if err == nil {
		v.Text = parsed.Content
	}
	for _, tc := range raw.ToolCalls {
		v.ToolCalls = append(v.ToolCalls, toolCallView{ID: tc.ID, Name: tc.Function.Name, Arguments: prettyJSON(tc.Function.Arguments)})
	}
	return v
}

// withoutToolCalls returns a message's raw JSON without its tool_calls.
func withoutToolCalls(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	delete(m, "tool_calls")
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}

// prettyJSON indents s when it is JSON, else returns it as is.
func prettyJSON(s string) string {
	var b bytes.Buffer
	if json.Indent(&b, []byte(s), "", "  ") != nil {
		return s
	}
	return b.String()
}
