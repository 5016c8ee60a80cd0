package upstream

import (
	"errors"
	"io"
	"net/http"
)

// MaxSideReplyBytes bounds the body of a side model's reply (the
// summariser's, fact extraction's): a summary or a list of facts is a few
// KiB, so a body past this is broken or hostile, and is not read on.
const MaxSideReplyBytes = 4 << 20

// ErrBodyTooLarge reports a response body longer than LimitBodies allows.
var ErrBodyTooLarge = errors.New("upstream response body exceeds its limit")

// LimitBodies returns next with every response body bounded to max bytes:
// a read past them fails with ErrBodyTooLarge, so a client that reads a
// whole reply (an SDK decoding it) holds at most max bytes of it, whatever
// the upstream sends.
func LimitBodies(next http.RoundTripper, max int64) http.RoundTripper {
	return &limitTransport{next: next, max: max}
}

// limitTransport is LimitBodies' RoundTripper.
type limitTransport struct {
	next http.RoundTripper
	max  int64
}

func (t *limitTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{ReadCloser: resp.Body, left: t.max}
	return resp, nil
}

// limitedBody fails a read past its last allowed byte. It reads one byte
// more than it allows, to tell a body of exactly the limit from a longer
// one.
type limitedBody struct {
	io.ReadCloser
	left int64 // bytes still allowed; -1 once the limit was passed
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, ErrBodyTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	if int64(n) <= b.left {
		b.left -= int64(n)
		return n, err
	}
	n, b.left = int(b.left), -1
	return n, ErrBodyTooLarge
}
