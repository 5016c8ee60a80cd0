package ui

import (
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// countedBody is a request body that counts the bytes read of it.
type countedBody struct {
	r io.Reader
	n atomic.Int64
}

func (b *countedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func (b *countedBody) Close() error { return nil }

// TestFormBodiesBounded: a POST to the inspector — the login form, open to
// anyone who reaches the port — is read up to maxFormBytes, as the
// URL-encoded form its pages send; a multipart body is refused unread. The
// login read any body whole before checking the key: a multipart one's
// file parts were spooled to temporary files without limit (and 32 MiB
// held in memory), a URL-encoded one up to 10 MiB, with no deadline.
func TestFormBodiesBounded(t *testing.T) {
	st := mustStore(t)
	h := uiHandler(t, st, adminGuard())
	big := strings.Repeat("A", 4<<20)

	var mp strings.Builder
	mw := multipart.NewWriter(&mp)
	mw.WriteField("key", adminKey)
	fw, _ := mw.CreateFormFile("f", "a.bin")
	io.WriteString(fw, big)
	mw.Close()

	for _, tt := range []struct {
		name, ct, body string
		want           int
	}{
		{"multipart", mw.FormDataContentType(), mp.String(), http.StatusUnsupportedMediaType},
		{"oversized form", "application/x-www-form-urlencoded", url.Values{"key": {adminKey}, "pad": {big}}.Encode(), http.StatusRequestEntityTooLarge},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := &countedBody{r: strings.NewReader(tt.body)}
			req := httptest.NewRequest(http.MethodPost, "/ui/login", body)
			req.ContentLength = int64(len(tt.body))
			req.Header.Set("Content-Type", tt.ct)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Fatalf("status %d, want %d", rec.Code, tt.want)
			}
			if len(rec.Result().Cookies()) != 0 {
				t.Fatal("a session was opened")
			}
			if n := body.n.Load(); n > 2*maxFormBytes {
				t.Fatalf("read %d bytes of the body, want at most %d", n, 2*maxFormBytes)
			}
		})
	}

	// The inspector's own forms still work.
	c := browser(t)
	base := mustUI(t, st, adminGuard())
	login(t, c, base, adminKey)
}
