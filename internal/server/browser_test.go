package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/apierr"
)

func TestBrowserGuardCheck(t *testing.T) {
	g := NewBrowserGuard("memgate.internal:8080", []string{"gw.example.com", ".corp.example"}, []string{"https://app.example.com"})
	type req struct {
		method, host, ct, body string
		hdr                    map[string]string
	}
	cases := []struct {
		name     string
		r        req
		json     bool
		wantCode string // "" = allowed
	}{
		{"sdk post", req{method: "POST", host: "localhost:8080", ct: "application/json", body: "{}"}, true, ""},
		{"sdk post charset", req{method: "POST", host: "127.0.0.1:8080", ct: "application/json; charset=utf-8", body: "{}"}, true, ""},
		{"ipv6 loopback", req{method: "GET", host: "[::1]:8080"}, true, ""},
		{"lan ip literal", req{method: "GET", host: "192.168.1.20:8080"}, true, ""},
		{"listen name", req{method: "GET", host: "MemGate.Internal:8080"}, true, ""},
		{"allow-listed name", req{method: "GET", host: "gw.example.com"}, true, ""},
		{"allow-listed suffix", req{method: "GET", host: "a.corp.example:9000"}, true, ""},
		{"dot localhost", req{method: "GET", host: "app.localhost:8080"}, true, ""},
		// Finding 4: DNS rebinding.
		{"rebinding host", req{method: "GET", host: "attacker.example:8080"}, true, "host_not_allowed"},
		{"suffix is not a name", req{method: "GET", host: "corp.example.evil"}, true, "host_not_allowed"},
		// Finding 4: a cross-site page posting text/plain.
		{"cross-site text/plain", req{method: "POST", host: "localhost:8080", ct: "text/plain", body: "{}",
			hdr: map[string]string{"Origin": "https://evil.example"}}, true, "cross_origin_forbidden"},
		{"null origin", req{method: "POST", host: "localhost:8080", ct: "application/json", body: "{}",
			hdr: map[string]string{"Origin": "null"}}, true, "cross_origin_forbidden"},
		{"other port same host", req{method: "GET", host: "localhost:8080",
			hdr: map[string]string{"Origin": "http://localhost:3000"}}, true, "cross_origin_forbidden"},
		{"same origin", req{method: "POST", host: "localhost:8080", ct: "application/x-www-form-urlencoded", body: "a=b",
			hdr: map[string]string{"Origin": "http://localhost:8080"}}, false, ""},
		{"same origin default port", req{method: "POST", host: "gw.example.com", ct: "application/json", body: "{}",
			hdr: map[string]string{"Origin": "https://gw.example.com"}}, true, ""},
		{"allow-listed origin", req{method: "POST", host: "localhost:8080", ct: "application/json", body: "{}",
			hdr: map[string]string{"Origin": "https://APP.example.com"}}, true, ""},
		{"no origin cross-site fetch", req{method: "POST", host: "localhost:8080", ct: "application/json", body: "{}",
			hdr: map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}}, true, "cross_origin_forbidden"},
		{"cross-site navigation", req{method: "GET", host: "localhost:8080",
			hdr: map[string]string{"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}}, false, ""},
		{"same-origin fetch", req{method: "GET", host: "localhost:8080",
			hdr: map[string]string{"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"}}, false, ""},
		{"text/plain no origin", req{method: "POST", host: "localhost:8080", ct: "text/plain", body: "{}"}, true, "unsupported_media_type"},
		{"no content type", req{method: "POST", host: "localhost:8080", body: "{}"}, true, ""},
		{"no content type cross-site", req{method: "POST", host: "localhost:8080", body: "{}",
			hdr: map[string]string{"Origin": "https://evil.example"}}, true, "cross_origin_forbidden"},
		{"multipart on json route", req{method: "POST", host: "localhost:8080", ct: "multipart/form-data; boundary=x", body: "--x--"}, true, "unsupported_media_type"},
		{"form on json route", req{method: "POST", host: "localhost:8080", ct: "application/x-www-form-urlencoded", body: "a=b"}, true, "unsupported_media_type"},
		{"form on form route", req{method: "POST", host: "localhost:8080", ct: "application/x-www-form-urlencoded", body: "a=b"}, false, ""},
		{"delete without body", req{method: "DELETE", host: "localhost:8080"}, true, ""},
		{"post without body", req{method: "POST", host: "localhost:8080"}, true, ""},
		{"upper case json", req{method: "POST", host: "localhost:8080", ct: "Application/JSON", body: "{}"}, true, ""},
		{"json-seq is not json", req{method: "POST", host: "localhost:8080", ct: "application/jsonx", body: "{}"}, true, "unsupported_media_type"},
		{"problem+json", req{method: "POST", host: "localhost:8080", ct: "application/merge-patch+json", body: "{}"}, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body *strings.Reader
			if tc.r.body != "" {
				body = strings.NewReader(tc.r.body)
			}
			var r *http.Request
			if body != nil {
				r = httptest.NewRequest(tc.r.method, "/v1/memory/users/alice/facts", body)
			} else {
				r = httptest.NewRequest(tc.r.method, "/v1/memory/users/alice/facts", nil)
			}
			r.Host = tc.r.host
			if tc.r.ct != "" {
				r.Header.Set("Content-Type", tc.r.ct)
			}
			for k, v := range tc.r.hdr {
				r.Header.Set(k, v)
			}
			e := g.Check(r, tc.json)
			switch {
			case tc.wantCode == "" && e != nil:
				t.Fatalf("refused (%s), want allowed", e.Code)
			case tc.wantCode != "" && e == nil:
				t.Fatalf("allowed, want %s", tc.wantCode)
			case e != nil && e.Code != tc.wantCode:
				t.Fatalf("code %s, want %s", e.Code, tc.wantCode)
			}
		})
	}
}

func TestBrowserGuardNilAllows(t *testing.T) {
	var g *BrowserGuard
	r := httptest.NewRequest("POST", "/v1/memory/search", strings.NewReader("{}"))
	r.Host = "attacker.example"
	r.Header.Set("Origin", "https://evil.example")
	if e := g.Check(r, true); e != nil {
		t.Fatalf("nil guard refused: %v", e)
	}
}

func TestBrowserGuardMiddlewareWritesShape(t *testing.T) {
	e := echo.New()
	called := false
	var shaped bool
	write := func(w http.ResponseWriter, ae *apierr.Error) {
		shaped = true
		apierr.Write(w, ae)
	}
	e.POST("/x", func(c echo.Context) error { called = true; return c.NoContent(200) },
		NewBrowserGuard(":8080", nil, nil).Middleware(true, write))
	r := httptest.NewRequest("POST", "/x", strings.NewReader("{}"))
	r.Host = "attacker.example:8080"
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	e.ServeHTTP(w, r)
	if called || w.Code != http.StatusForbidden || !shaped {
		t.Fatalf("called=%v status=%d shaped=%v", called, w.Code, shaped)
	}
	if !strings.Contains(w.Body.String(), `"code":"host_not_allowed"`) {
		t.Fatalf("body %s", w.Body)
	}
}

// BenchmarkBrowserGuardSDK is the guard's cost on an SDK's memory-on
// request (loopback Host, JSON, no Origin).
func BenchmarkBrowserGuardSDK(b *testing.B) {
	g := NewBrowserGuard("127.0.0.1:8080", nil, nil)
	r := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader("{}"))
	r.Host = "localhost:8080"
	r.Header.Set("Content-Type", "application/json")
	b.ReportAllocs()
	for b.Loop() {
		if e := g.Check(r, true); e != nil {
			b.Fatal(e)
		}
	}
}
