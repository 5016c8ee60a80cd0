package upstream

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// TestLimitBodies: a body up to the limit is read whole; one byte more
// fails with ErrBodyTooLarge, after at most the limit was handed out.
func TestLimitBodies(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		io.WriteString(w, strings.Repeat("x", n))
	}))
	t.Cleanup(srv.Close)
	const limit = 1000
	c := &http.Client{Transport: LimitBodies(http.DefaultTransport, limit)}
	for _, tt := range []struct {
		size    int
		tooLong bool
	}{{0, false}, {1, false}, {limit, false}, {limit + 1, true}, {100 * limit, true}} {
		resp, err := c.Get(srv.URL + "/" + strconv.Itoa(tt.size))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case tt.tooLong && (!errors.Is(err, ErrBodyTooLarge) || len(b) > limit):
			t.Errorf("%d bytes: read %d, err %v; want at most %d and ErrBodyTooLarge", tt.size, len(b), err, limit)
		case !tt.tooLong && (err != nil || len(b) != tt.size):
			t.Errorf("%d bytes: read %d, err %v; want all of them", tt.size, len(b), err)
		}
	}
}
