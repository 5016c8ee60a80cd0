package proxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/apierr"
	"github.com/memgate/memgate/internal/chatreq"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/server"
)

// bodyReadTimeout bounds reading a request body (the server has no read
// timeout, which would also cut streams).
const bodyReadTimeout = 60 * time.Second

// handleChat serves POST /v1/chat/completions: read and validate the body,
// resolve the identity, let the Preparer rewrite the messages (degrading to
// the client's own on failure), forward through the reverse proxy and
// capture the exchange. When the messages are not rewritten the client's
// body goes upstream byte for byte.
func (p *Proxy) handleChat(c echo.Context) error {
	r, w := c.Request(), c.Response()
	x := server.ExchangeOf(r.Context())
	raw, aerr := readBody(w, r, p.opts.MaxBodyBytes)
	if aerr != nil {
		return aerr
	}
	req, aerr := chatreq.Parse(raw)
	if aerr != nil {
		return aerr
	}
	id, mode, aerr := p.identify(r.Header, req.User)
	if aerr != nil {
		return aerr
	}
	mreq, aerr := req.Memory(r.Header, id, mode)
	if aerr != nil {
		return aerr
	}
	at, aerr := saidAt(r.Header, time.Now())
	if aerr != nil {
		return aerr
	}
	f := &forward{x: x, chat: true, model: req.Model}
	out := raw
	if id.User != "" && mode != memory.ModeOff {
		if id.Conversation == "" {
			id.Conversation = chatreq.NewConversationID()
			mreq.Identity = id
		}
		w.Header()["X-Memory-Conversation"] = []string{id.Conversation}
		if mode.Injects() && p.deps.Preparer != nil {
			out = p.inject(r.Context(), w.Header(), x, req, mreq)
		}
		if mode.Stores() && p.deps.Capturer != nil {
			f.capture = &chatCapture{p: p, x: x, id: id, model: req.Model, parsed: req.Parsed, at: at}
			defer f.capture.abandon()
		}
	}
	fr := withForward(r, f)
	fr.Body = io.NopCloser(bytes.NewReader(out))
	fr.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(out)), nil }
	fr.ContentLength = int64(len(out))
	fr.TransferEncoding = nil
	p.rp.ServeHTTP(finalWriter{w}, fr)
	// The reverse proxy returns (rather than aborting the response) only
	// when the upstream's whole answer reached the client.
	if f.capture != nil {
		f.capture.finish(r.Context())
	}
	return nil
}

// readBody reads a request body within limit and bodyReadTimeout.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *apierr.Error) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(bodyReadTimeout))
	defer rc.SetReadDeadline(time.Time{})
	return apierr.ReadBody(w, r, limit)
}

// inject asks the Preparer for the messages to send and returns the body to
// forward, setting the X-Memory-* response headers. On any failure it
// returns the client's body unchanged and marks the response degraded.
func (p *Proxy) inject(ctx context.Context, h http.Header, x *server.Exchange, req *chatreq.Request, mreq memory.Request) []byte {
	prep, err := p.prepareWithin(ctx, mreq)
	var out []byte
	if err == nil {
		out, err = req.WithMessages(prep.Messages)
	}
	if err != nil {
		p.m.degraded.Inc()
		h["X-Memory-Degraded"] = []string{"true"}
		p.log.Warn("memory unavailable, forwarding without it", "request_id", x.ID(), "error", err)
		return req.Raw
	}
	h["X-Memory-Tokens-Original"] = []string{strconv.Itoa(prep.TokensOriginal)}
	h["X-Memory-Tokens-Sent"] = []string{strconv.Itoa(prep.TokensSent)}
	if prep.OverBudget {
		h["X-Memory-Over-Budget"] = []string{"true"}
	}
	return out
}
