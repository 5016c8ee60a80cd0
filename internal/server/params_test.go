package server

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

// TestPathParamsAreUnescaped: a handler reads a path parameter as the
// client meant it, however the client percent-encoded it (before, echo
// handed "bob%40example.com" on, and an erasure of that user was a 400),
// and decodes it once.
func TestPathParamsAreUnescaped(t *testing.T) {
	s, err := New(prometheus.NewRegistry(), nil, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	s.Echo().GET("/users/:user/items/:id", func(c echo.Context) error {
		return c.String(http.StatusOK, c.Param("user")+"|"+c.Param("id"))
	})
	tests := []struct {
		path       string
		wantStatus int
		want       string
	}{
		{"/users/bob@example.com/items/1", http.StatusOK, "bob@example.com|1"},
		{"/users/bob%40example.com/items/1", http.StatusOK, "bob@example.com|1"},
		{"/users/ann%2Bchat%40example.com/items/a%3Ab", http.StatusOK, "ann+chat@example.com|a:b"},
		{"/users/ann+chat@example.com/items/1", http.StatusOK, "ann+chat@example.com|1"},
		{"/users/a%2Fb/items/1", http.StatusOK, "a/b|1"},
		// An escaped '%' is the character, decoded once: a body user
		// value may hold one (memory.BodyUserID).
		{"/users/a%2541%20b/items/1", http.StatusOK, "a%41 b|1"},
		{"/users/x%2F%2541/items/1", http.StatusOK, "x/%41|1"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
			body, _ := io.ReadAll(rec.Body)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status %d (%s), want %d", rec.Code, body, tt.wantStatus)
			}
			if tt.want != "" && string(body) != tt.want {
				t.Fatalf("handler read %q, want %q", body, tt.want)
			}
		})
	}
}
