package proxy

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/memgate/memgate/internal/capture"
	"github.com/memgate/memgate/internal/memory"
	"github.com/memgate/memgate/internal/wirehdr"
)

// handleChat serves POST /v1/chat/completions: validate, resolve identity,
// let the Preparer rewrite the messages (degrading to the client's own on
// failure), forward with retries, relay the answer and capture the exchange.
// When the messages are not rewritten the client's body goes upstream byte
// for byte.
func (s *Server) handleChat(w *echo.Response, r *http.Request, x *exchange) {
	buf, aerr := readBody(r, s.cfg.MaxBodyBytes)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	body, aerr := parseChat(buf)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	id, mode, aerr := s.identify(r.Header, body.user)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	// Memory needs the messages read; a plain proxy only checks them.
	memOn := id.User != "" && mode != memory.ModeOff
	var parsed []memory.Message
	if memOn {
		parsed, aerr = parseMessages(body.messages)
	} else {
		aerr = checkMessages(body.messages)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	mreq, aerr := memoryRequest(r.Header, id, mode, &body, parsed)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	out := body.raw
	if memOn {
		if id.Conversation == "" {
			id.Conversation = newConversationID()
			mreq.Identity = id
		}
		w.Header()["X-Memory-Conversation"] = []string{id.Conversation}
		if mode.Injects() && s.deps.Preparer != nil {
			out = s.inject(r.Context(), w.Header(), x, &body, mreq)
		}
	}
	header := s.up.outHeader(r.Header, x.id, s.requireKey())
	start := time.Now()
	resp, err := s.up.postChat(r.Context(), header, out)
	if err != nil {
		x.upstream = time.Since(start)
		if r.Context().Err() != nil {
			x.status = statusClientClosed
			return
		}
		e := upstreamError(err)
		s.log.Warn("upstream request failed", "request_id", x.id, "status", e.Status, "error", err)
		writeError(w, e)
		return
	}
	up := resp.Body
	defer up.Close()
	copyResponseHeader(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)

	wantCapture := memOn && mode.Stores() && s.deps.Capturer != nil && resp.StatusCode/100 == 2
	if isEventStream(resp.Header) {
		rc := http.NewResponseController(w.Writer)
		// The client learns at once that the stream started, as it would
		// from the upstream itself.
		if rc.Flush() != nil {
			x.status = statusClientClosed
			return
		}
		var t *tee
		if wantCapture {
			t = newTee()
		}
		err = relaySSE(w, rc.Flush, up, t)
		x.upstream = time.Since(start)
		if err != nil {
			if t != nil {
				t.abandon()
			}
			s.streamFailed(r, x, err)
			return
		}
		if t != nil {
			s.captures.Go(func() {
				reply, usage, err := t.result()
				if err != nil {
					s.captureSkipped(x, err)
					return
				}
				s.captureExchange(r.Context(), x, id, body.model, parsed, reply, usage)
			})
		}
		return
	}
	var dst io.Writer = clientWriter{w}
	var got *bytes.Buffer
	if wantCapture {
		// The body is read in full and the exchange stored before the client
		// gets it: a turn the client has an answer for is never lost to a
		// crash in between.
		got = new(bytes.Buffer)
		dst = got
	}
	cb := copyPool.Get().(*[]byte)
	_, err = io.CopyBuffer(dst, up, *cb)
	copyPool.Put(cb)
	x.upstream = time.Since(start)
	if err != nil {
		s.streamFailed(r, x, err)
		return
	}
	if got != nil {
		if reply, usage, err := capture.ReplyFromJSON(got.Bytes()); err != nil {
			s.captureSkipped(x, err)
		} else {
			s.captureExchange(r.Context(), x, id, body.model, parsed, reply, usage)
		}
		if _, err := w.Write(got.Bytes()); err != nil {
			x.status = statusClientClosed
		}
	}
}

// inject asks the Preparer for the messages to send and returns the body to
// forward, setting the X-Memory-* response headers. On any failure it
// returns the client's body unchanged and marks the response degraded.
func (s *Server) inject(ctx context.Context, h http.Header, x *exchange, body *chatBody, req memory.Request) []byte {
	p, err := s.prepareWithin(ctx, req)
	if err != nil {
		s.m.degraded.Inc()
		h["X-Memory-Degraded"] = []string{"true"}
		s.log.Warn("memory unavailable, forwarding without it", "request_id", x.id, "error", err)
		return body.raw
	}
	h["X-Memory-Tokens-Original"] = []string{strconv.Itoa(p.TokensOriginal)}
	h["X-Memory-Tokens-Sent"] = []string{strconv.Itoa(p.TokensSent)}
	if p.OverBudget {
		h["X-Memory-Over-Budget"] = []string{"true"}
	}
	return body.withMessages(p.Messages)
}

// streamFailed ends a response whose upstream body broke after the headers
// were sent: a gone client is recorded as 499; otherwise (an upstream
// failure, or shutdown cancelling the stream) the connection is aborted so the client sees an incomplete response, never a truncated one
// passed off as complete.
func (s *Server) streamFailed(r *http.Request, x *exchange, err error) {
	if s.baseCtx.Err() != nil {
		// Shutdown's grace period is over: cut the stream.
		x.status = http.StatusServiceUnavailable
		panic(http.ErrAbortHandler)
	}
	if err == errClientGone || r.Context().Err() != nil {
		x.status = statusClientClosed
		return
	}
	x.status = http.StatusBadGateway
	s.log.Warn("upstream response broke mid-body", "request_id", x.id, "error", err, "cause", context.Cause(r.Context()))
	panic(http.ErrAbortHandler)
}

func (s *Server) captureSkipped(x *exchange, err error) {
	s.m.captureDr.Inc()
	s.log.LogAttrs(context.Background(), slog.LevelWarn, "exchange not captured",
		slog.String("request_id", x.id), slog.String("error", err.Error()))
}

// copyResponseHeader copies the upstream's response headers, minus
// hop-by-hop ones. The upstream's X-Request-Id becomes
// X-Upstream-Request-Id so the gateway's own id stays.
func copyResponseHeader(dst, src http.Header) {
	for k, v := range src {
		switch {
		case isHopHeader(k):
		case k == "X-Request-Id":
			dst["X-Upstream-Request-Id"] = v
		default:
			dst[k] = v
		}
	}
}

func isEventStream(h http.Header) bool {
	ct := wirehdr.Value(h, "Content-Type")
	return strings.HasPrefix(ct, "text/event-stream")
}

// clientWriter reports any failed write to the client as errClientGone.
type clientWriter struct{ w *echo.Response } // one pointer: boxing it allocates nothing

func (c clientWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if err != nil {
		return n, errClientGone
	}
	return n, nil
}
