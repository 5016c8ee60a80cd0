package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"
)

// errIdleTimeout is the cause of an upstream request cancelled because its
// response body stayed silent for IdleStreamTimeout.
var errIdleTimeout = errors.New("upstream stream idle timeout")

// idleTransport bounds the silences of a response body, which
// http.Transport does not: each attempt goes out under a context of its
// own, cancelled with errIdleTimeout when no byte of the body arrives for d,
// and when the body is closed.
type idleTransport struct {
	next http.RoundTripper
	d    time.Duration
}

// RoundTrip implements http.RoundTripper.
func (t *idleTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel(nil)
		return nil, err
	}
	b := &idleBody{ReadCloser: resp.Body, d: t.d, cancel: cancel}
	b.timer = time.AfterFunc(t.d, func() { cancel(errIdleTimeout) })
	resp.Body = b
	resp.Request = req
	return resp, nil
}

// idleBody is a response body whose request is cancelled when no byte
// arrives for d, and once it is closed.
type idleBody struct {
	io.ReadCloser
	timer  *time.Timer
	d      time.Duration
	cancel context.CancelCauseFunc
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.timer.Reset(b.d)
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}
